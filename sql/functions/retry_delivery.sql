-- outbox.retry_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                       p_error_code text, p_error_ref text DEFAULT NULL) RETURNS text
-- (public, SPEC R-AK-5, R-AK-7, §13)
-- Purpose: close the current attempt as retryable and schedule the next one.
--   attempt_count < max_attempts of the destination's policy (outbox.outbox_retry_policies):
--     finish outcome retryable / retry_disposition retry_scheduled, status pending, lease
--     cleared, available_at = now + outbox._backoff_delay(policy, attempt_count), i.e.
--     least(max_delay, base_delay * multiplier^(attempt_count-1)) * (1 +- jitter);
--     last_error_code/last_error_ref set. Returns 'pending'.
--   attempt_count >= max_attempts: quarantine instead - finish outcome retryable /
--     retry_disposition quarantined, status quarantined, quarantine row with reason
--     retry_exhausted and the event digest. Returns 'quarantined'. Never a silent success.
--   A destination without a policy row gets the default one first (outbox._ensure_retry_policy).
--   p_error_ref is sanitized (outbox._dispatch_sanitize_ref: no control characters, <= 200 chars).
-- Locking/fencing: outbox._dispatch_fence (row lock, destination + event + current attempt +
--   token + live lease; OB001 otherwise, nothing changes).
-- Time: now = clock_timestamp() captured once per call.
-- SQLSTATEs: 22023 when p_error_code is unknown or not retryable (checked before the fence; nothing
--   changes); OB001 fencing rejected.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.retry_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                      p_lease_token uuid, p_error_code text, p_error_ref text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_retryable boolean;
    v_d         outbox.outbox_deliveries;
    v_policy    outbox.outbox_retry_policies;
    v_ref       text := outbox._dispatch_sanitize_ref(p_error_ref);
BEGIN
    SELECT c.retryable INTO v_retryable FROM outbox.error_codes AS c WHERE c.code = p_error_code;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'retry_delivery: unknown error code'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('error_code %L is not in outbox.error_codes', p_error_code);
    END IF;
    IF NOT v_retryable THEN
        RAISE EXCEPTION 'retry_delivery: error code is not retryable'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('error_code %s is non-retryable: use quarantine_delivery', p_error_code),
                  HINT = 'non-retryable codes are quarantine reasons';
    END IF;

    v_d := outbox._dispatch_fence(p_destination, p_event_id, p_attempt_id, p_lease_token, v_now);

    SELECT rp.* INTO v_policy FROM outbox.outbox_retry_policies AS rp WHERE rp.destination = p_destination;
    IF NOT FOUND THEN
        PERFORM outbox._ensure_retry_policy(p_destination);
        SELECT rp.* INTO STRICT v_policy FROM outbox.outbox_retry_policies AS rp WHERE rp.destination = p_destination;
    END IF;

    IF v_d.attempt_count >= v_policy.max_attempts THEN
        PERFORM outbox._dispatch_quarantine(v_d, 'retryable', 'retry_exhausted', p_error_code, v_ref, v_now);
        RETURN 'quarantined';
    END IF;

    INSERT INTO outbox.outbox_delivery_attempt_finishes
           (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
    VALUES (p_attempt_id, v_now, 'retryable', 'retry_scheduled', p_error_code, v_ref);

    UPDATE outbox.outbox_deliveries AS d
       SET status           = 'pending',
           available_at     = v_now + outbox._backoff_delay(v_policy, v_d.attempt_count),
           lease_owner      = NULL,
           lease_token      = NULL,
           lease_expires_at = NULL,
           last_error_code  = p_error_code,
           last_error_ref   = v_ref
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       AND d.status = 'leased' AND d.current_attempt_id = p_attempt_id AND d.lease_token = p_lease_token;
    IF NOT FOUND THEN -- unreachable while the fence's row lock is held; kept as the CAS guard
        RAISE EXCEPTION 'fencing rejected: lease changed concurrently'
            USING ERRCODE = 'OB001', DETAIL = pg_catalog.format('delivery %s/%s', p_destination, p_event_id);
    END IF;
    RETURN 'pending';
END
$fn$;

COMMENT ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) IS
    'Close the fenced current attempt as retryable: back to pending with the policy backoff, or quarantined with reason retry_exhausted at max attempts; returns pending | quarantined. 22023 unknown/non-retryable code, OB001 fencing. SPEC R-AK-5.';
REVOKE ALL ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) TO outbox_dispatcher;
