-- outbox._quarantine_write(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[],
--                          p_outcome text, p_reasons text[], p_error_codes text[], p_error_refs text[],
--                          p_now timestamptz) RETURNS integer  (private, SPEC R-AK-5, R-AK-6)
-- Purpose: THE quarantine write, set-based, for deliveries the caller has locked and fenced
--   (quarantine_deliveries, retry_deliveries on exhaustion, recovery of a lease that expired on
--   the last allowed attempt): in one statement append the finish of the current attempt
--   (outcome p_outcome, disposition quarantined), set the delivery terminal quarantined with the
--   lease cleared, and insert the quarantine row with the event digest. Arrays are parallel.
--   Returns the number of deliveries quarantined. Then releases the parked successors of
--   per_aggregate chains (outbox._release_successors).
-- Caller: the dispatch functions (running as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._quarantine_write(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[], p_outcome text, p_reasons text[], p_error_codes text[], p_error_refs text[], p_now timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_count integer;
BEGIN
    WITH q AS (
        SELECT u.destination, u.event_id, u.attempt_id, u.reason, u.error_code, u.error_ref
          FROM unnest(p_destinations, p_event_ids, p_attempt_ids, p_reasons, p_error_codes, p_error_refs)
               AS u(destination, event_id, attempt_id, reason, error_code, error_ref)
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
        SELECT q.attempt_id, p_now, p_outcome, 'quarantined', q.error_code, q.error_ref
          FROM q
        RETURNING attempt_id
    ), moved AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status           = 'quarantined',
               lease_owner      = NULL,
               lease_token      = NULL,
               lease_expires_at = NULL,
               last_error_code  = q.error_code,
               last_error_ref   = q.error_ref
          FROM q
         WHERE d.destination = q.destination AND d.event_id = q.event_id
           AND d.status = 'leased' AND d.current_attempt_id = q.attempt_id
        RETURNING d.event_id
    ), recorded AS (
        INSERT INTO outbox.outbox_quarantine
               (destination, event_id, attempt_id, reason, event_envelope_digest_algorithm_version,
                event_envelope_sha256, quarantined_at)
        SELECT q.destination, e.event_id, q.attempt_id, q.reason,
               e.event_envelope_digest_algorithm_version, e.event_envelope_sha256, p_now
          FROM q
          JOIN outbox.outbox_events AS e ON e.event_id = q.event_id
        RETURNING event_id
    )
    SELECT pg_catalog.count(*)::integer INTO v_count FROM moved;
    -- a quarantined head no longer holds its aggregate's chain (R-CL-6, R-CL-7)
    PERFORM outbox._release_successors(p_destinations, p_event_ids, p_now);
    RETURN v_count;
END
$function$;

COMMENT ON FUNCTION outbox._quarantine_write(text[], uuid[], uuid[], text, text[], text[], text[], timestamp with time zone) IS
    'Private: set-based quarantine of locked, fenced deliveries - finish, terminal state, quarantine row (SPEC R-AK-5, R-AK-6).';

REVOKE ALL ON FUNCTION outbox._quarantine_write(text[], uuid[], uuid[], text, text[], text[], text[], timestamp with time zone) FROM PUBLIC;
