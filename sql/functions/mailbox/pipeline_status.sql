-- mailbox.pipeline_status(p_source text)
-- RETURNS TABLE (watermark bigint, lag_ids bigint, lag_seconds double precision, open_holes integer,
--   released_holes integer, late_rows integer, head_msg_id bigint, head_state text,
--   oldest_unmarked_terminal_seconds double precision, abandoned_backfills integer, dead_letters integer)
-- (public, SPEC R-MX-12, §13)
-- Purpose: the operator's view of one source (outboxctl mailbox status, pump metrics): W, the
--   backlog and its age, holes, late rows, the head and its state, owed and abandoned marks,
--   dead letters. Read-only; one snapshot.
-- Cost: partial indexes (unfinished, owed, attention); hole ranges.
-- SQLSTATEs: 22023 invalid or unknown source.
-- Design notes (each column): docs/mailbox.md#mailboxpipeline_status
-- Caller: outbox_mailbox, outbox_auditor.
CREATE OR REPLACE FUNCTION mailbox.pipeline_status(p_source text)
 RETURNS TABLE(watermark bigint, lag_ids bigint, lag_seconds double precision, open_holes integer, released_holes integer, late_rows integer, head_msg_id bigint, head_state text, oldest_unmarked_terminal_seconds double precision, abandoned_backfills integer, dead_letters integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_src mailbox.sources;
BEGIN
    v_src := mailbox._mailbox_source(p_source, false);
    RETURN QUERY
    SELECT v_src.watermark,
           u.n,
           coalesce(pg_catalog.date_part('epoch', v_now - u.oldest), 0)::double precision,
           least(coalesce(hs.open_ids, 0), 2147483647)::integer,
           least(coalesce(hs.released_ids, 0), 2147483647)::integer,
           (SELECT pg_catalog.count(*)::integer FROM mailbox.messages AS m WHERE m.source = p_source AND m.state = 'late'),
           hd.msg_id,
           CASE WHEN hd.msg_id IS NULL THEN NULL
                WHEN hd.lease_expires_at > v_now THEN 'leased'
                ELSE hd.state END,
           coalesce((SELECT pg_catalog.date_part('epoch', v_now - pg_catalog.min(m.finished_at))
                       FROM mailbox.messages AS m WHERE m.source = p_source AND m.backfill_state = 'owed'), 0)::double precision,
           (SELECT pg_catalog.count(*)::integer FROM mailbox.messages AS m WHERE m.source = p_source AND m.backfill_state = 'abandoned'),
           (SELECT pg_catalog.count(*)::integer FROM mailbox.messages AS m WHERE m.source = p_source AND m.state = 'dead')
      FROM (SELECT pg_catalog.count(*) AS n, pg_catalog.min(m.enqueued_at) AS oldest
              FROM mailbox.messages AS m WHERE m.source = p_source AND m.state IN ('pending', 'failed')) AS u
     CROSS JOIN (SELECT pg_catalog.sum(h.last_id - h.first_id + 1) FILTER (WHERE h.released_at IS NULL) AS open_ids,
                        pg_catalog.sum(h.last_id - h.first_id + 1) FILTER (WHERE h.released_at IS NOT NULL) AS released_ids
                   FROM mailbox.holes AS h WHERE h.source = p_source) AS hs
      LEFT JOIN LATERAL (SELECT m.msg_id, m.state, m.lease_expires_at
                           FROM mailbox.messages AS m
                          WHERE m.source = p_source AND m.state IN ('pending', 'failed') AND m.msg_id <= v_src.watermark
                          ORDER BY m.msg_id LIMIT 1) AS hd ON true;
END
$function$;

COMMENT ON FUNCTION mailbox.pipeline_status(text) IS
    'One source''s pipeline status: watermark, lag (unfinished ids, seconds), holes, late rows, head and its state, oldest unmarked terminal age, abandoned backfills, dead letters. SPEC R-MX-12.';

REVOKE ALL ON FUNCTION mailbox.pipeline_status(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.pipeline_status(text) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION mailbox.pipeline_status(text) TO outbox_mailbox;
