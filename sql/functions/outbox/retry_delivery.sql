-- outbox.retry_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                       p_error_code text, p_error_ref text DEFAULT NULL) RETURNS text
-- (public, SPEC R-AK-5, R-AK-7, R-AK-9, §13)
-- Purpose: record one retryable outcome - a batch of one of outbox.retry_deliveries (same
--   fencing, same code rule, same backoff and exhaustion): 'pending' (back to pending after the
--   policy's backoff) or 'quarantined' (max attempts reached: retry_exhausted; never for
--   awaiting_revision, R-AK-5). p_error_ref is sanitized.
-- SQLSTATEs: 22023 unknown or non-retryable error code; OB001 fencing rejected. Nothing changes
--   on error.
-- Caller: outbox_dispatcher.
CREATE OR REPLACE FUNCTION outbox.retry_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid, p_error_code text, p_error_ref text DEFAULT NULL::text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_r record;
BEGIN
    SELECT r.outcome, r.sqlstate, r.detail INTO v_r
      FROM outbox.retry_deliveries(pg_catalog.json_build_array(pg_catalog.json_build_object(
               'destination', p_destination, 'eventId', p_event_id, 'attemptId', p_attempt_id,
               'leaseToken', p_lease_token, 'errorCode', p_error_code, 'errorRef', p_error_ref))) AS r;
    PERFORM outbox._raise_item('retry_delivery', v_r.sqlstate, v_r.detail);
    RETURN v_r.outcome;
END
$function$;

COMMENT ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) IS
    'Record a retryable outcome for a fenced live lease (a batch of one of retry_deliveries): pending after backoff, or quarantined as retry_exhausted at max attempts. 22023 bad code, OB001 fencing. SPEC R-AK-5, R-AK-9.';

REVOKE ALL ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) TO outbox_dispatcher;
