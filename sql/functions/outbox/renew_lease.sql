-- outbox.renew_lease(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                    p_lease interval) RETURNS timestamptz  (public, SPEC R-CL-3, R-CL-4)
-- Purpose: extend a live lease to now + p_lease and return the new expiry. The attempt, token
--   and owner stay the same; no attempt row is written.
-- Locking/fencing: outbox._dispatch_fence locks the delivery row (FOR UPDATE) and requires
--   destination + event + current attempt + token + a live lease; anything else raises OB001 and
--   changes nothing. A lease that has already expired cannot be revived, even if recovery has not
--   run yet.
-- Time: now = clock_timestamp() captured once per call (see outbox.claim_deliveries).
-- SQLSTATEs: 22023 lease outside 1 second..1 hour; OB001 fencing rejected.
-- Caller: outbox_dispatcher.
CREATE OR REPLACE FUNCTION outbox.renew_lease(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid, p_lease interval)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_expires timestamptz;
BEGIN
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'renew_lease: invalid lease'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('lease %s is outside 1 second..1 hour', p_lease);
    END IF;

    PERFORM outbox._dispatch_fence(p_destination, p_event_id, p_attempt_id, p_lease_token, v_now);

    UPDATE outbox.outbox_deliveries AS d
       SET lease_expires_at = v_now + p_lease
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       AND d.status = 'leased' AND d.current_attempt_id = p_attempt_id AND d.lease_token = p_lease_token
    RETURNING d.lease_expires_at INTO v_expires;
    IF NOT FOUND THEN -- unreachable while the fence's row lock is held; kept as the CAS guard
        RAISE EXCEPTION 'fencing rejected: lease changed concurrently'
            USING ERRCODE = 'OB001', DETAIL = pg_catalog.format('delivery %s/%s', p_destination, p_event_id);
    END IF;
    RETURN v_expires;
END
$function$;

COMMENT ON FUNCTION outbox.renew_lease(text, uuid, uuid, uuid, interval) IS
    'Extend a live lease to now()+lease, fenced by destination+event+current attempt+lease token (OB001 otherwise); returns the new expiry. SPEC R-CL-4.';

REVOKE ALL ON FUNCTION outbox.renew_lease(text, uuid, uuid, uuid, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.renew_lease(text, uuid, uuid, uuid, interval) TO outbox_dispatcher;
