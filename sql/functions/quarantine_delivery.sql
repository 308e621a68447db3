-- outbox.quarantine_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
--                            p_lease_token uuid, p_reason text, p_error_code text) RETURNS void
-- (public, SPEC R-AK-6, R-AK-7, §13)
-- Purpose: close the current attempt as non_retryable (retry_disposition quarantined,
--   normalized_error_code p_error_code), set the delivery to the terminal state quarantined with
--   the lease cleared and last_error_code set, and insert the outbox_quarantine row with the
--   event's envelope digest and the attempt id. Quarantine is a state, never a deletion or a
--   fake success; a quarantined delivery is never claimed again and keeps published_at NULL.
-- Locking/fencing: outbox._dispatch_fence (row lock, destination + event + current attempt +
--   token + live lease; OB001 otherwise, nothing changes).
-- Time: now = clock_timestamp() captured once per call.
-- SQLSTATEs: 22023 when p_reason is not a non-retryable code of outbox.error_codes or p_error_code
--   is not a known code (checked before the fence; nothing changes); OB001 fencing rejected.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.quarantine_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                           p_lease_token uuid, p_reason text, p_error_code text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_d   outbox.outbox_deliveries;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox.error_codes AS c WHERE c.code = p_reason AND NOT c.retryable) THEN
        RAISE EXCEPTION 'quarantine_delivery: invalid reason'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('reason %L is not a non-retryable code of outbox.error_codes', p_reason);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM outbox.error_codes AS c WHERE c.code = p_error_code) THEN
        RAISE EXCEPTION 'quarantine_delivery: unknown error code'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('error_code %L is not in outbox.error_codes', p_error_code);
    END IF;

    v_d := outbox._dispatch_fence(p_destination, p_event_id, p_attempt_id, p_lease_token, v_now);
    PERFORM outbox._dispatch_quarantine(v_d, 'non_retryable', p_reason, p_error_code, NULL, v_now);
END
$fn$;

COMMENT ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text) IS
    'Close the fenced current attempt as non_retryable and quarantine the delivery with the event digest; reason must be a non-retryable code, error_code a known code (22023 otherwise); OB001 fencing. SPEC R-AK-6.';
REVOKE ALL ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text) TO outbox_dispatcher;
