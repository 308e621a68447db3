-- outbox.quarantine_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
--                            p_lease_token uuid, p_reason text, p_error_code text,
--                            p_error_ref text DEFAULT NULL) RETURNS void
-- (public, SPEC R-AK-6, R-AK-7, R-AK-9, §13)
-- Purpose: record one non-retryable outcome - a batch of one of outbox.quarantine_deliveries
--   (same fencing, same reason/code rule, same quarantine write): non_retryable finish, terminal
--   quarantined, quarantine row with the event digest. p_error_ref (optional) is the consumer's
--   reference for the rejection (e.g. the "ref" of a 409/422 answer, already filtered by the
--   dispatcher); it is sanitized by outbox._dispatch_sanitize_ref (control characters become
--   spaces, whitespace collapsed, trimmed, cut to 200 characters, empty -> NULL) and kept as
--   sanitized_error_ref on the attempt finish and last_error_ref on the delivery.
-- SQLSTATEs: 22023 reason not a non-retryable code / unknown error code; OB001 fencing rejected.
-- Caller: outbox_dispatcher.
CREATE OR REPLACE FUNCTION outbox.quarantine_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid, p_reason text, p_error_code text, p_error_ref text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_r record;
BEGIN
    SELECT r.outcome, r.sqlstate, r.detail INTO v_r
      FROM outbox.quarantine_deliveries(pg_catalog.json_build_array(pg_catalog.json_build_object(
               'destination', p_destination, 'eventId', p_event_id, 'attemptId', p_attempt_id,
               'leaseToken', p_lease_token, 'reason', p_reason, 'errorCode', p_error_code,
               'errorRef', p_error_ref))) AS r;
    PERFORM outbox._raise_item('quarantine_delivery', v_r.sqlstate, v_r.detail);
END
$function$;

COMMENT ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text, text) IS
    'Quarantine a fenced live lease (a batch of one of quarantine_deliveries): non_retryable finish (with the sanitized error ref), terminal state, quarantine row with the event digest. 22023 bad reason/code, OB001 fencing. SPEC R-AK-6, R-AK-9.';

REVOKE ALL ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text, text) TO outbox_dispatcher;
