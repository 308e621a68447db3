-- outbox.archive_integrity_problems(created_from timestamptz DEFAULT NULL,
--                                   created_before timestamptz DEFAULT NULL)
--   RETURNS TABLE (run_id uuid, problem text)
-- Purpose: the completeness hook of SPEC R-RT-3 / §11: a completeness proof that covers events
--   created in [created_from, created_before) (NULL = unbounded) must call this function in its
--   snapshot and may claim complete_for_supported_scope only when it returns no row. It returns
--   one row per problem: every archive run whose archived events overlap the range and whose
--   verification fails (outbox.verify_archive_run), and every archived row whose run has no audit
--   row (orphan: its run row is missing). An empty result means the archived part of the range
--   is exactly what the runs recorded.
-- Cost: verifies every overlapping run (re-canonicalizes their envelopes): an auditor's call.
-- Locking: none. Caller: outbox_auditor, outbox_retention.
CREATE OR REPLACE FUNCTION outbox.archive_integrity_problems(p_created_from timestamp with time zone DEFAULT NULL::timestamp with time zone, p_created_before timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(run_id uuid, problem text)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT v.run_id, v.problem
      FROM outbox.archive_runs r
     CROSS JOIN LATERAL outbox.verify_archive_run(r.run_id) v
     WHERE r.archived > 0
       AND (p_created_from IS NULL OR r.newest_created_at >= p_created_from)
       AND (p_created_before IS NULL OR r.oldest_created_at < p_created_before)
       AND NOT v.verified
    UNION ALL
    SELECT o.run_id, pg_catalog.format('orphan: %s archived %s row(s) without an archive run row', o.tbl, o.n)
      FROM (SELECT a.run_id, 'events' AS tbl, pg_catalog.count(*) AS n FROM outbox.archived_events a
             WHERE (p_created_from IS NULL OR a.created_at >= p_created_from)
               AND (p_created_before IS NULL OR a.created_at < p_created_before)
             GROUP BY a.run_id
            UNION ALL
            SELECT a.run_id, 'deliveries', pg_catalog.count(*) FROM outbox.archived_deliveries a GROUP BY a.run_id
            UNION ALL
            SELECT a.run_id, 'attempt_starts', pg_catalog.count(*) FROM outbox.archived_attempt_starts a GROUP BY a.run_id
            UNION ALL
            SELECT a.run_id, 'attempt_finishes', pg_catalog.count(*) FROM outbox.archived_attempt_finishes a GROUP BY a.run_id
            UNION ALL
            SELECT a.run_id, 'quarantine', pg_catalog.count(*) FROM outbox.archived_quarantine a GROUP BY a.run_id) o
     WHERE NOT EXISTS (SELECT 1 FROM outbox.archive_runs r WHERE r.run_id = o.run_id)
     ORDER BY 1, 2
$function$;

COMMENT ON FUNCTION outbox.archive_integrity_problems(timestamp with time zone, timestamp with time zone) IS
    'Completeness hook (SPEC R-RT-3, §11): archive runs overlapping the created_at range that fail verification, and orphaned archive rows; a proof may be complete only when this is empty. Caller: outbox_auditor, outbox_retention.';

REVOKE ALL ON FUNCTION outbox.archive_integrity_problems(timestamp with time zone, timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.archive_integrity_problems(timestamp with time zone, timestamp with time zone) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.archive_integrity_problems(timestamp with time zone, timestamp with time zone) TO outbox_retention;
