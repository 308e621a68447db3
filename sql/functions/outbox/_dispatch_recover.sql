-- outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamptz)
-- RETURNS integer  (private, SPEC R-CL-2, R-AK-5, R-AK-8, R-AK-10)
-- Purpose: lease-expiry recovery in ONE statement. For up to p_max_rows leased deliveries whose
--   lease expired at p_now (all destinations when p_destinations is NULL): append the finish
--   lease_expired_unknown to the open attempt and make the delivery pending again, or quarantine
--   it (retry_exhausted) when that was its last allowed attempt. Returns how many attempts it closed.
-- Locking: FOR UPDATE SKIP LOCKED on the delivery rows (never waits for a worker finishing its row).
-- SQLSTATEs: none of its own.
-- Design notes (fencing race, index): docs/performance-notes.md#outbox_dispatch_recover
-- Caller: outbox.recover_expired_leases and outbox.claim_deliveries; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_count       integer;
    v_quarantined integer;
BEGIN
    -- expired on the last allowed attempt: quarantined (set-based, the one quarantine write)
    WITH exhausted AS (
        SELECT d.destination, d.event_id, d.current_attempt_id
          FROM outbox.outbox_deliveries AS d
          LEFT JOIN outbox.outbox_retry_policies AS p ON p.destination = d.destination
         WHERE d.status = 'leased'
           AND d.lease_expires_at <= p_now
           AND (p_destinations IS NULL OR d.destination = ANY (p_destinations))
           -- the default: an uncorrelated subquery, evaluated once (an InitPlan), no join to reorder
           AND d.attempt_count - d.recovery_attempt_base
               >= coalesce(p.max_attempts, (SELECT dp.max_attempts FROM outbox.outbox_retry_policy_default AS dp
                                             WHERE dp.destination = '*'))
         ORDER BY d.lease_expires_at
         LIMIT p_max_rows
           FOR UPDATE OF d SKIP LOCKED
    )
    SELECT coalesce(outbox._quarantine_write(pg_catalog.array_agg(x.destination), pg_catalog.array_agg(x.event_id),
                                             pg_catalog.array_agg(x.current_attempt_id), 'lease_expired_unknown',
                                             pg_catalog.array_agg('retry_exhausted'::text),
                                             pg_catalog.array_agg('retry_exhausted'::text),
                                             pg_catalog.array_agg('lease expired on the last allowed attempt'::text), p_now), 0)
      INTO v_quarantined
      FROM exhausted AS x
    HAVING pg_catalog.count(*) > 0;
    v_quarantined := coalesce(v_quarantined, 0);

    WITH expired AS (
        SELECT d.ctid AS row_ctid, d.current_attempt_id
          FROM outbox.outbox_deliveries AS d
         WHERE d.status = 'leased'
           AND d.lease_expires_at <= p_now
           AND (p_destinations IS NULL OR d.destination = ANY (p_destinations))
         ORDER BY d.lease_expires_at
         LIMIT p_max_rows
           FOR UPDATE SKIP LOCKED
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
        SELECT x.current_attempt_id, p_now, 'lease_expired_unknown', 'reclaimable', NULL, NULL
          FROM expired AS x
         WHERE x.current_attempt_id IS NOT NULL
        ON CONFLICT (attempt_id) DO NOTHING
        RETURNING attempt_id
    ), moved AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status           = 'pending',
               available_at     = p_now,
               lease_owner      = NULL,
               lease_token      = NULL,
               lease_expires_at = NULL
         WHERE d.ctid = ANY (ARRAY(SELECT x.row_ctid FROM expired AS x))
           AND d.status = 'leased'
        RETURNING d.event_id
    )
    SELECT pg_catalog.count(*)::integer INTO v_count FROM moved;
    RETURN v_count + v_quarantined;
END
$function$;

COMMENT ON FUNCTION outbox._dispatch_recover(text[], integer, timestamp with time zone) IS
    'Private: close expired leases as lease_expired_unknown and make their deliveries pending again, one bounded SKIP LOCKED statement (SPEC R-CL-2).';

REVOKE ALL ON FUNCTION outbox._dispatch_recover(text[], integer, timestamp with time zone) FROM PUBLIC;
