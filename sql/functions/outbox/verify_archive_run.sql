-- outbox.verify_archive_run(run_id uuid) RETURNS TABLE (run_id uuid, verified bool, problem text)
-- Purpose: restore-drill evidence for one archive run (SPEC R-RT-3): recomputes, from the archive
--   tables alone, the run's row counts, the set digest of its archived (event_id, digest) pairs
--   and the digest of the complete content of its archived rows (outbox._archive_run_digests),
--   compares them with the run's audit row, and re-verifies every archived event's digest with
--   the database's own canonicalizer on the envelope rebuilt from the archived columns. One row:
--   verified = true and problem NULL, or verified = false and the problems found, '; '-separated
--   (unknown_run, <table>_count_mismatch, archived_set_mismatch, content_mismatch,
--   event_digest_mismatch <event_id>: <problem>, at most 10 listed). A missing, added or altered
--   archive row therefore fails verification.
-- Locking: none (plain reads). SQLSTATEs: 22023 run_id NULL.
-- Caller: outbox_auditor, outbox_retention.
CREATE OR REPLACE FUNCTION outbox.verify_archive_run(p_run_id uuid)
 RETURNS TABLE(run_id uuid, verified boolean, problem text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_run      outbox.archive_runs%ROWTYPE;
    v_dig      record;
    v_problems text[] := '{}';
BEGIN
    IF p_run_id IS NULL THEN
        RAISE EXCEPTION 'verify_archive_run: run_id is NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_run FROM outbox.archive_runs r WHERE r.run_id = p_run_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT p_run_id, false, 'unknown_run'::text;
        RETURN;
    END IF;
    SELECT * INTO v_dig FROM outbox._archive_run_digests(p_run_id);
    IF v_dig.events <> v_run.archived THEN
        v_problems := v_problems || pg_catalog.format('events_count_mismatch: run row %s, archive %s', v_run.archived, v_dig.events);
    END IF;
    IF v_dig.deliveries <> v_run.deliveries THEN
        v_problems := v_problems || pg_catalog.format('deliveries_count_mismatch: run row %s, archive %s', v_run.deliveries, v_dig.deliveries);
    END IF;
    IF v_dig.attempt_starts <> v_run.attempt_starts THEN
        v_problems := v_problems || pg_catalog.format('attempt_starts_count_mismatch: run row %s, archive %s', v_run.attempt_starts, v_dig.attempt_starts);
    END IF;
    IF v_dig.attempt_finishes <> v_run.attempt_finishes THEN
        v_problems := v_problems || pg_catalog.format('attempt_finishes_count_mismatch: run row %s, archive %s', v_run.attempt_finishes, v_dig.attempt_finishes);
    END IF;
    IF v_dig.quarantine_rows <> v_run.quarantine_rows THEN
        v_problems := v_problems || pg_catalog.format('quarantine_count_mismatch: run row %s, archive %s', v_run.quarantine_rows, v_dig.quarantine_rows);
    END IF;
    IF v_dig.archived_set_sha256 <> v_run.archived_set_sha256 THEN
        v_problems := v_problems || 'archived_set_mismatch: the (event_id, digest) set digest is not reproduced'::text;
    END IF;
    IF v_dig.content_sha256 <> v_run.content_sha256 THEN
        v_problems := v_problems || 'content_mismatch: the archived rows are not the rows the run wrote'::text;
    END IF;
    -- Every archived envelope re-verified with the canonicalizer, from the archived columns.
    v_problems := v_problems || ARRAY(
        SELECT pg_catalog.format('event_digest_mismatch %s: %s', x.event_id, x.problem)
          FROM (SELECT a.event_id,
                       outbox._archive_digest_problem(pg_catalog.jsonb_populate_record(NULL::outbox.outbox_events, pg_catalog.to_jsonb(a))) AS problem
                  FROM outbox.archived_events a WHERE a.run_id = p_run_id) x
         WHERE x.problem IS NOT NULL
         ORDER BY x.event_id LIMIT 10);
    RETURN QUERY SELECT p_run_id, pg_catalog.cardinality(v_problems) = 0,
                        CASE WHEN pg_catalog.cardinality(v_problems) = 0 THEN NULL
                             ELSE pg_catalog.array_to_string(v_problems, '; ') END;
END
$function$;

COMMENT ON FUNCTION outbox.verify_archive_run(uuid) IS
    'Recompute an archive run''s counts, (event_id, digest) set digest, content digest and every archived envelope digest and compare with its audit row (SPEC R-RT-3). Caller: outbox_auditor, outbox_retention.';

REVOKE ALL ON FUNCTION outbox.verify_archive_run(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.verify_archive_run(uuid) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.verify_archive_run(uuid) TO outbox_retention;
