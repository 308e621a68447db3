-- mailbox.fail_head(p_source text, p_msg_id bigint, p_lease_token uuid, p_error_code text)
-- RETURNS text  (public, SPEC R-MX-3, R-MX-6, R-MX-10, §13)
-- Purpose: record a failed attempt of the leased head (after the handler's transaction rolled
--   back; call it in a transaction of its own). A retryable error code (outbox.error_codes,
--   R-AK-7) makes the row failed, due again after least(cap, base * 2^(attempt-1)) - it keeps
--   the head meanwhile, so nothing behind it is processed (R-MX-3); at max_attempts it becomes
--   dead with reason retry_exhausted. A non-retryable code makes it dead at once with the code
--   as reason. A dead row owes its backfill from the same statement (R-MX-8). Returns failed or
--   dead.
-- Fencing: as complete_head (OB001 stale/expired/foreign token, OB402 wrong state).
-- Time: now = clock_timestamp() captured once per call.
-- SQLSTATEs: 22023 invalid source or unknown error code; OB001; OB402; OB403.
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.fail_head(p_source text, p_msg_id bigint, p_lease_token uuid, p_error_code text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_src       mailbox.sources;
    v_retryable boolean;
    v_attempt   integer;
    v_dead      boolean;
    v_reason    text;
    v_delay     numeric;
BEGIN
    v_src := mailbox._mailbox_source(p_source, false);
    SELECT ec.retryable INTO v_retryable FROM outbox.error_codes AS ec WHERE ec.code = p_error_code;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fail_head: unknown error code'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('error code %L is not in outbox.error_codes (SPEC R-AK-7)', p_error_code);
    END IF;
    IF p_msg_id IS NULL OR p_lease_token IS NULL THEN
        RAISE EXCEPTION 'fail_head: msg_id and lease_token are required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);

    SELECT m.attempt INTO v_attempt
      FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.msg_id = p_msg_id
       AND m.state IN ('pending', 'failed')
       AND m.lease_token = p_lease_token AND m.lease_expires_at > v_now
       FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM mailbox._mailbox_fence_fail(p_source, p_msg_id, p_lease_token, v_now, 'fail_head');
    END IF;
    v_dead := NOT v_retryable OR v_attempt >= v_src.max_attempts;
    v_reason := CASE WHEN NOT v_retryable THEN p_error_code WHEN v_dead THEN 'retry_exhausted' END;
    v_delay := least(pg_catalog.date_part('epoch', v_src.head_backoff_cap)::numeric,
                     pg_catalog.date_part('epoch', v_src.head_backoff_base)::numeric
                     * pg_catalog.power(2::numeric, least(greatest(v_attempt - 1, 0), 60)));

    UPDATE mailbox.messages AS m
       SET state = CASE WHEN v_dead THEN 'dead' ELSE 'failed' END,
           last_error_code = p_error_code,
           dead_reason = v_reason,
           finished_at = CASE WHEN v_dead THEN v_now END,
           available_at = CASE WHEN v_dead THEN m.available_at ELSE v_now + pg_catalog.make_interval(secs => v_delay::double precision) END,
           lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
           backfill_state = CASE WHEN v_dead THEN 'owed' END,
           backfill_next_at = CASE WHEN v_dead THEN v_now END
     WHERE m.source = p_source AND m.msg_id = p_msg_id;
    RETURN CASE WHEN v_dead THEN 'dead' ELSE 'failed' END;
END
$function$;

COMMENT ON FUNCTION mailbox.fail_head(text, bigint, uuid, text) IS
    'Record a failed attempt of the leased head: failed with backoff least(cap, base*2^(attempt-1)) holding the head, or dead (retry_exhausted at max_attempts, or the non-retryable code) with the backfill intent in the same statement. SPEC R-MX-3, R-MX-6.';

REVOKE ALL ON FUNCTION mailbox.fail_head(text, bigint, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.fail_head(text, bigint, uuid, text) TO outbox_mailbox;
