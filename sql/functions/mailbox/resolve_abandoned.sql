-- mailbox.resolve_abandoned(p_source text, p_msg_id bigint, p_resolution text, p_note text)
-- RETURNS void  (public, SPEC R-MX-8, §13)
-- Purpose: an operator's reconciliation of an abandoned backfill (`outboxctl mailbox resolve`):
--   marked_manually (the operator set the mark in the mailbox) or not_needed (the mailbox row
--   is gone or needs no mark). Writes one immutable audit row (who: session_user, when, note)
--   and moves the row's backfill from abandoned to resolved; only then may the processing row be
--   archived. Automatic retries never resume.
-- Not guarded by the pump hold (OB403): the pump never touches abandoned rows, so an operator
--   resolves while it runs; the row lock serializes with a concurrent record_backfill.
-- Locking: the processing row FOR UPDATE.
-- SQLSTATEs: 22023 invalid source, resolution, or note (1..500 characters after trimming);
--   OB402 the row is not an abandoned backfill.
-- Caller: outbox_mailbox (an operator's login granted that role).
CREATE OR REPLACE FUNCTION mailbox.resolve_abandoned(p_source text, p_msg_id bigint, p_resolution text, p_note text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
DECLARE
    v_now   timestamptz := pg_catalog.clock_timestamp();
    v_note  text := pg_catalog.btrim(pg_catalog.regexp_replace(coalesce(p_note, ''), '[[:cntrl:]]', ' ', 'g'));
    v_state text;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_resolution IS NULL OR p_resolution NOT IN ('marked_manually', 'not_needed') THEN
        RAISE EXCEPTION 'resolve_abandoned: invalid resolution'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('resolution %L must be marked_manually or not_needed', p_resolution);
    END IF;
    IF v_note = '' OR pg_catalog.length(v_note) > 500 THEN
        RAISE EXCEPTION 'resolve_abandoned: invalid note'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'a note of 1..500 characters is required (the audit reads it)';
    END IF;
    SELECT m.backfill_state INTO v_state FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.msg_id = p_msg_id FOR UPDATE;
    IF v_state IS DISTINCT FROM 'abandoned' THEN
        RAISE EXCEPTION 'resolve_abandoned: mailbox outcome for a row in the wrong state'
            USING ERRCODE = 'OB402',
                  DETAIL = pg_catalog.format('processing row %s/%s is not an abandoned backfill (%s)', p_source, p_msg_id,
                                             coalesce(v_state, 'no such row or no backfill owed'));
    END IF;
    INSERT INTO mailbox.backfill_resolutions (source, msg_id, resolution, note, resolved_by, resolved_at)
    VALUES (p_source, p_msg_id, p_resolution, v_note, session_user, v_now);
    UPDATE mailbox.messages AS m SET backfill_state = 'resolved'
     WHERE m.source = p_source AND m.msg_id = p_msg_id;
END
$function$;

COMMENT ON FUNCTION mailbox.resolve_abandoned(text, bigint, text, text) IS
    'Operator: resolve an abandoned backfill (marked_manually | not_needed) with an audited note; OB402 when the row is not abandoned. SPEC R-MX-8.';

REVOKE ALL ON FUNCTION mailbox.resolve_abandoned(text, bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.resolve_abandoned(text, bigint, text, text) TO outbox_mailbox;
