-- outbox.recover_expired_leases(p_max_rows integer DEFAULT 1000) RETURNS integer
-- (public, SPEC R-CL-2, R-AK-8, §13)
-- Purpose: for up to p_max_rows leased deliveries (all destinations) whose lease has expired,
--   append the finish outcome=lease_expired_unknown / retry_disposition=reclaimable to the open
--   attempt (only if it has none) and move the delivery back to pending with available_at = now,
--   lease cleared; returns how many were recovered. One statement (outbox._dispatch_recover);
--   claim_deliveries runs the same step for its own destinations, so calling this is optional.
-- Locking: FOR UPDATE SKIP LOCKED on the deliveries - a worker holding its row (acking right now)
--   is skipped; whoever locks first wins, the other sees the committed state (the late worker's
--   fence then fails with OB001). Never two finishes for one start (finishes' primary key).
-- Time: now = clock_timestamp() captured once per call: a lease is expired when
--   lease_expires_at <= now, the same test the fence applies.
-- SQLSTATEs: 22023 when p_max_rows is outside 1..100000.
-- Caller: outbox_dispatcher.
CREATE OR REPLACE FUNCTION outbox.recover_expired_leases(p_max_rows integer DEFAULT 1000)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_max_rows IS NULL OR p_max_rows < 1 OR p_max_rows > 100000 THEN
        RAISE EXCEPTION 'recover_expired_leases: invalid max_rows'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('max_rows %s is outside 1..100000', p_max_rows);
    END IF;
    RETURN outbox._dispatch_recover(NULL, p_max_rows, pg_catalog.clock_timestamp());
END
$function$;

COMMENT ON FUNCTION outbox.recover_expired_leases(integer) IS
    'Close up to max_rows expired leases as lease_expired_unknown (one finish per open attempt) and make the deliveries pending again; returns the count. SPEC R-CL-2.';

REVOKE ALL ON FUNCTION outbox.recover_expired_leases(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.recover_expired_leases(integer) TO outbox_dispatcher;
