-- mailbox.complete_head(p_source text, p_msg_id bigint, p_lease_token uuid, p_outcome text,
--   p_reason text DEFAULT NULL) RETURNS void  (public, SPEC R-MX-6, R-MX-8, R-MX-10, §13)
-- Purpose: finish the leased head inside the handler's transaction (business effect and outbound
--   events commit or roll back with it, R-MX-10). ONE statement writes the terminal state
--   (succeeded, or dead with p_reason) AND the backfill intent (owed, R-MX-8). Terminal states
--   never revert (trigger, R-MX-6). Fenced by source + msg_id + lease token + a live lease.
-- Time: clock_timestamp() once per call.
-- SQLSTATEs: 22023 invalid source, outcome not succeeded|dead, reason missing/too long/given
--   for succeeded; OB001 stale/expired/foreign token; OB402 terminal, late or missing row;
--   OB403 another session holds the pump.
-- Design notes: docs/mailbox.md#mailboxcomplete_head
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.complete_head(p_source text, p_msg_id bigint, p_lease_token uuid, p_outcome text, p_reason text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
DECLARE
    v_now    timestamptz := pg_catalog.clock_timestamp();
    v_reason text;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'dead') THEN
        RAISE EXCEPTION 'complete_head: invalid outcome'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('outcome %L must be succeeded or dead', p_outcome);
    END IF;
    IF p_outcome = 'succeeded' AND p_reason IS NOT NULL THEN
        RAISE EXCEPTION 'complete_head: a reason is only for dead'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'pass reason NULL with outcome succeeded';
    END IF;
    IF p_outcome = 'dead' THEN
        v_reason := pg_catalog.btrim(pg_catalog.regexp_replace(coalesce(p_reason, ''), '[[:cntrl:]]', ' ', 'g'));
        IF v_reason = '' OR pg_catalog.length(v_reason) > 500 THEN
            RAISE EXCEPTION 'complete_head: invalid reason'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = 'a dead letter needs a reason of 1..500 characters';
        END IF;
    END IF;
    IF p_msg_id IS NULL OR p_lease_token IS NULL THEN
        RAISE EXCEPTION 'complete_head: msg_id and lease_token are required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);

    UPDATE mailbox.messages AS m
       SET state = p_outcome,
           dead_reason = v_reason,
           finished_at = v_now,
           lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
           backfill_state = 'owed',
           backfill_next_at = v_now
     WHERE m.source = p_source AND m.msg_id = p_msg_id
       AND m.state IN ('pending', 'failed')
       AND m.lease_token = p_lease_token AND m.lease_expires_at > v_now;
    IF NOT FOUND THEN
        PERFORM mailbox._mailbox_fence_fail(p_source, p_msg_id, p_lease_token, v_now, 'complete_head');
    END IF;
END
$function$;

COMMENT ON FUNCTION mailbox.complete_head(text, bigint, uuid, text, text) IS
    'Finish the leased head (succeeded | dead with reason) and record the backfill intent in the same statement, inside the handler''s transaction. OB001 stale lease, OB402 wrong state, OB403 pump held elsewhere. SPEC R-MX-6, R-MX-8, R-MX-10.';

REVOKE ALL ON FUNCTION mailbox.complete_head(text, bigint, uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.complete_head(text, bigint, uuid, text, text) TO outbox_mailbox;
