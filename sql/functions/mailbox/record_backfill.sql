-- mailbox.record_backfill(p_source text, p_msg_id bigint, p_outcome text) RETURNS text
-- (public, SPEC R-MX-7, R-MX-8, §13)
-- Purpose: record what writing the processed mark in the mailbox did: written or already_marked
--   (done), missing (abandoned at once), transient (retry with backoff, or abandoned once
--   backfill_deadline has passed since OUR enqueue time). An abandoned row stays abandoned until
--   an operator resolves it (resolve_abandoned); it never counts as marked.
-- Locking: the processing row FOR UPDATE. Time: clock_timestamp() once per call.
-- SQLSTATEs: 22023 invalid source or outcome; OB402 the row owes no backfill (missing, not
--   terminal, already done or abandoned); OB403 another session holds the pump.
-- Design notes: docs/mailbox.md#mailboxrecord_backfill
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.record_backfill(p_source text, p_msg_id bigint, p_outcome text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_src mailbox.sources;
    v_row mailbox.messages;
    v_res text;
BEGIN
    v_src := mailbox._mailbox_source(p_source, false);
    IF p_outcome IS NULL OR p_outcome NOT IN ('written', 'already_marked', 'missing', 'transient') THEN
        RAISE EXCEPTION 'record_backfill: invalid outcome'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('outcome %L must be written, already_marked, missing or transient', p_outcome);
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);
    SELECT m.* INTO v_row FROM mailbox.messages AS m WHERE m.source = p_source AND m.msg_id = p_msg_id FOR UPDATE;
    IF NOT FOUND OR v_row.backfill_state IS DISTINCT FROM 'owed' THEN
        RAISE EXCEPTION 'record_backfill: mailbox outcome for a row in the wrong state'
            USING ERRCODE = 'OB402',
                  DETAIL = pg_catalog.format('processing row %s/%s owes no backfill (%s)', p_source, p_msg_id,
                                             CASE WHEN v_row.msg_id IS NULL THEN 'no such row'
                                                  ELSE 'state ' || v_row.state || ', backfill ' || coalesce(v_row.backfill_state, 'none') END);
    END IF;
    v_res := CASE
        WHEN p_outcome IN ('written', 'already_marked') THEN 'done'
        WHEN p_outcome = 'missing' THEN 'abandoned'
        WHEN v_now >= v_row.enqueued_at + v_src.backfill_deadline THEN 'abandoned'
        ELSE 'retry' END;
    UPDATE mailbox.messages AS m
       SET backfill_state = CASE v_res WHEN 'retry' THEN 'owed' ELSE v_res END,
           backfill_outcome = p_outcome,
           backfill_attempts = m.backfill_attempts + 1,
           backfill_next_at = CASE WHEN v_res = 'retry'
                                   THEN v_now + pg_catalog.make_interval(secs => least(60, pg_catalog.power(2, least(m.backfill_attempts, 10)))::double precision)
                                   ELSE m.backfill_next_at END,
           backfill_done_at = CASE WHEN v_res = 'done' THEN v_now END,
           abandon_reason = CASE WHEN v_res = 'abandoned' THEN CASE p_outcome WHEN 'missing' THEN 'missing' ELSE 'deadline' END END,
           abandoned_at = CASE WHEN v_res = 'abandoned' THEN v_now END
     WHERE m.source = p_source AND m.msg_id = p_msg_id;
    IF v_res = 'abandoned' THEN
        RAISE WARNING 'mailbox backfill abandoned: source %, msg_id %, reason %', p_source, p_msg_id,
                      CASE p_outcome WHEN 'missing' THEN 'mailbox row missing' ELSE 'transient failures past backfill_deadline' END;
    END IF;
    RETURN v_res;
END
$function$;

COMMENT ON FUNCTION mailbox.record_backfill(text, bigint, text) IS
    'Record a backfill outcome: written/already_marked -> done, missing -> abandoned, transient -> retry until backfill_deadline from our enqueue time, then abandoned. OB402 when the row owes no backfill. SPEC R-MX-7, R-MX-8.';

REVOKE ALL ON FUNCTION mailbox.record_backfill(text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.record_backfill(text, bigint, text) TO outbox_mailbox;
