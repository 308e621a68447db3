-- mailbox.claim_backfill(p_source text, p_batch integer) RETURNS SETOF bigint
-- (public, SPEC R-MX-7, R-MX-8, §13)
-- Purpose: the msg_ids of terminal rows that owe the processed mark, not done, not abandoned,
--   due (a transient failure backs off, see record_backfill), oldest id first, at most p_batch.
--   Only terminal rows can owe a mark, so PENDING/FAILED rows are never marked (R-MX-8).
--   No lease: writing the mark is idempotent (empty -> timestamp, never overwrite).
-- Cost: index messages_backfill_owed (source, msg_id) WHERE backfill_state = 'owed'.
-- SQLSTATEs: 22023 invalid source, batch outside 1..1000; OB403 another session holds the pump.
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.claim_backfill(p_source text, p_batch integer)
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_batch IS NULL OR p_batch < 1 OR p_batch > 1000 THEN
        RAISE EXCEPTION 'claim_backfill: invalid batch'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('batch %s is outside 1..1000', p_batch);
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);
    RETURN QUERY
    SELECT m.msg_id
      FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.backfill_state = 'owed'
       AND m.backfill_next_at <= pg_catalog.clock_timestamp()
     ORDER BY m.msg_id
     LIMIT p_batch;
END
$function$;

COMMENT ON FUNCTION mailbox.claim_backfill(text, integer) IS
    'Terminal rows owing the processed mark (due, oldest first). SPEC R-MX-8.';

REVOKE ALL ON FUNCTION mailbox.claim_backfill(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.claim_backfill(text, integer) TO outbox_mailbox;
