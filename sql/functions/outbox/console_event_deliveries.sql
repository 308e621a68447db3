-- outbox.console_event_deliveries(p_event_id uuid)
-- RETURNS TABLE (destination text, consumer_name text, mandatory boolean, ..., status text, ...,
--                quarantine_reason text, quarantined_at timestamptz, case_id text, recoveries bigint)
--                (29 columns: see CREATE below)
-- (public, operator console, issue 25 item 1; SPEC R-AK-1..10)
-- Purpose: every delivery of one event for the console's detail, in destination order: the frozen
--   member, its state and timing, the lease owner (never the token), the last error, the ack's
--   receipt quartet, its latest quarantine and the number of recoveries.
-- Cost: the deliveries of one event by index, a primary-key lookup each.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL event id.
-- Design notes: docs/read-model.md#outboxconsole_event_deliveries
-- Callers: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.console_event_deliveries(p_event_id uuid)
 RETURNS TABLE(destination text, consumer_name text, mandatory boolean, expected_receipt_type text, expected_receipt_schema_version integer, projection_state text, required_projection_name text, required_projection_version integer, status text, available_at timestamp with time zone, created_at timestamp with time zone, attempt_count integer, recovery_attempt_base integer, lease_owner text, lease_expires_at timestamp with time zone, last_attempt_at timestamp with time zone, last_error_code text, last_error_ref text, delivered_at timestamp with time zone, ack_receipt_kind text, ack_receipt_type text, ack_receipt_ref text, ack_receipt_schema_version integer, ack_receipt_digest_algorithm_version text, ack_receipt_digest text, quarantine_reason text, quarantined_at timestamp with time zone, case_id text, recoveries bigint)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_event_id IS NULL THEN
        RAISE EXCEPTION 'console_event_deliveries: event_id is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT d.destination, d.consumer_name, d.mandatory, d.expected_receipt_type, d.expected_receipt_schema_version,
           m.projection_state, d.required_projection_name, d.required_projection_version, d.status,
           d.available_at, d.created_at, d.attempt_count, d.recovery_attempt_base, d.lease_owner, d.lease_expires_at,
           d.last_attempt_at, d.last_error_code, d.last_error_ref, d.delivered_at,
           d.ack_receipt_kind, d.ack_receipt_type, d.ack_receipt_ref, d.ack_receipt_schema_version,
           d.ack_receipt_digest_algorithm_version, d.ack_receipt_digest,
           q.reason, q.quarantined_at, q.case_id,
           (SELECT pg_catalog.count(*) FROM outbox.outbox_recoveries AS r
             WHERE r.destination = d.destination AND r.event_id = d.event_id)
      FROM outbox.outbox_deliveries AS d
      JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
      LEFT JOIN outbox.delivery_set_members AS m
             ON m.delivery_set_version = d.delivery_set_version AND m.event_type = e.event_type
            AND m.event_schema_version = e.schema_version AND m.destination = d.destination
      LEFT JOIN LATERAL (SELECT q1.reason, q1.quarantined_at, q1.case_id
                           FROM outbox.outbox_quarantine AS q1
                          WHERE q1.destination = d.destination AND q1.event_id = d.event_id
                          ORDER BY q1.quarantine_id DESC LIMIT 1) AS q ON true
     WHERE d.event_id = p_event_id
     ORDER BY d.destination;
END
$function$;

COMMENT ON FUNCTION outbox.console_event_deliveries(uuid) IS
    'Operator console: every delivery of one event - frozen member, state, last error code and sanitized ref, receipt quartet, latest quarantine and recovery count; never a lease token. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_event_deliveries(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_event_deliveries(uuid) TO outbox_auditor;
