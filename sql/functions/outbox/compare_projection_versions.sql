-- outbox.compare_projection_versions(projection_name text, a int, b int)
--   RETURNS TABLE (same bool, digest_a text, digest_b text, rows_a bigint, rows_b bigint,
--                  anti_join bigint, open_gaps bigint, open_quarantine bigint, sample_differences text[])
--   (public, SPEC R-PV-4, §13)
-- Purpose: compare two versions of a projection: their content digests (projection_digest) and
--   row counts; same = the digests are equal. anti_join: events with a receipt under one version
--   and not under the other (inbox.inbox_receipts); open_gaps: open revision gaps of either;
--   open_quarantine: quarantined deliveries targeting either; sample_differences: up to 10 row
--   keys (code-point order) present on one side only or with another row digest.
-- SQLSTATEs: OB802 a version not registered / without a row source; 22023 duplicate row keys.
-- Locking: none (reads). Caller: outbox_auditor, outbox_projector.
CREATE OR REPLACE FUNCTION outbox.compare_projection_versions(p_projection_name text, p_a integer, p_b integer)
 RETURNS TABLE(same boolean, digest_a text, digest_b text, rows_a bigint, rows_b bigint, anti_join bigint, open_gaps bigint, open_quarantine bigint, sample_differences text[])
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
 SET work_mem TO '64MB'
AS $function$
DECLARE
    v_da text := outbox.projection_digest(p_projection_name, p_a);
    v_db text := outbox.projection_digest(p_projection_name, p_b);
BEGIN
    RETURN QUERY
    WITH ra AS MATERIALIZED (SELECT * FROM outbox._projection_rows(p_projection_name, p_a)),
         rb AS MATERIALIZED (SELECT * FROM outbox._projection_rows(p_projection_name, p_b)),
         d AS (SELECT coalesce(ra.row_key, rb.row_key) AS k
                 FROM ra FULL JOIN rb ON rb.row_key = ra.row_key
                WHERE ra.row_sha256 IS DISTINCT FROM rb.row_sha256),
         ea AS (SELECT r.event_id FROM inbox.inbox_receipts AS r WHERE r.projection_name = p_projection_name AND r.projection_version = p_a),
         eb AS (SELECT r.event_id FROM inbox.inbox_receipts AS r WHERE r.projection_name = p_projection_name AND r.projection_version = p_b)
    SELECT v_da = v_db, v_da, v_db,
           (SELECT pg_catalog.count(*) FROM ra), (SELECT pg_catalog.count(*) FROM rb),
           (SELECT pg_catalog.count(*) FROM ((SELECT * FROM ea EXCEPT SELECT * FROM eb) UNION ALL (SELECT * FROM eb EXCEPT SELECT * FROM ea)) AS x),
           (SELECT pg_catalog.count(*) FROM inbox.inbox_revision_gaps AS g
             WHERE g.projection_name = p_projection_name AND g.projection_version IN (p_a, p_b) AND g.closed_at IS NULL),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS o
             WHERE o.status = 'quarantined' AND o.required_projection_name = p_projection_name
               AND o.required_projection_version IN (p_a, p_b)),
           (SELECT coalesce(pg_catalog.array_agg(s.k ORDER BY s.k COLLATE "C"), '{}')
              FROM (SELECT d.k FROM d ORDER BY d.k COLLATE "C" LIMIT 10) AS s);
END
$function$;

COMMENT ON FUNCTION outbox.compare_projection_versions(text, integer, integer) IS
    'Compare two projection versions: digests, rows, receipt anti-join, open gaps, open quarantine, up to 10 differing row keys (SPEC R-PV-4). Caller: outbox_auditor, outbox_projector.';

REVOKE ALL ON FUNCTION outbox.compare_projection_versions(text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.compare_projection_versions(text, integer, integer) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.compare_projection_versions(text, integer, integer) TO outbox_projector;
