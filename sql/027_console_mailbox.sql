-- The operator console's mailbox panel (issue 25 item 5; SPEC R-MX-12): one read function for
-- outbox_auditor that lists the mailbox sources with their pipeline status. New function only.
SET LOCAL ROLE outbox_owner;

-- mailbox.console_sources(p_limit integer)
-- RETURNS TABLE (source text, watermark bigint, lag_ids bigint, lag_seconds double precision,
--   open_holes integer, released_holes integer, late_rows integer, head_msg_id bigint,
--   head_state text, abandoned_backfills integer, dead_letters integer)
-- (public, operator console, issue 25 item 5; SPEC R-MX-12)
-- Purpose: the console's mailbox panel - every registered mailbox source (at most p_limit, by
--   name) with what mailbox.pipeline_status reports for it, so the auditor's read session can
--   show the pipeline without reading mailbox.sources itself.
-- SQLSTATEs: 22023 a limit outside 1..1000.
-- Callers: outbox_auditor.
CREATE FUNCTION mailbox.console_sources(p_limit integer)
RETURNS TABLE (source text, watermark bigint, lag_ids bigint, lag_seconds double precision,
               open_holes integer, released_holes integer, late_rows integer, head_msg_id bigint,
               head_state text, abandoned_backfills integer, dead_letters integer)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'console_mailbox_sources: a limit 1..1000 is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT s.source, p.watermark, p.lag_ids, p.lag_seconds, p.open_holes, p.released_holes,
           p.late_rows, p.head_msg_id, p.head_state, p.abandoned_backfills, p.dead_letters
      FROM (SELECT ms.source FROM mailbox.sources AS ms ORDER BY ms.source LIMIT p_limit) AS s
     CROSS JOIN LATERAL mailbox.pipeline_status(s.source) AS p
     ORDER BY s.source;
END
$fn$;

COMMENT ON FUNCTION mailbox.console_sources(integer) IS
    'Operator console: every mailbox source (at most p_limit, by name) with its pipeline status (mailbox.pipeline_status). Issue 25 item 5, R-MX-12.';
REVOKE ALL ON FUNCTION mailbox.console_sources(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.console_sources(integer) TO outbox_auditor;


RESET ROLE;
