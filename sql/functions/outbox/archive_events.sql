-- outbox.archive_events(older_than interval, max_rows int DEFAULT 1000)
--   RETURNS TABLE (run_id uuid, archived int, skipped int, archived_set_sha256 text)
--   (public, SPEC R-RT-1..4)
-- Purpose: the audited retention procedure: moves up to max_rows eligible events, oldest first,
--   with their deliveries, attempts, quarantine rows and publication time, from the hot tables
--   into the immutable archive tables in this one transaction, and writes the run's audit row.
--   Eligible: older than now() - older_than, every delivery terminal, no unresolved quarantine,
--   no active legal hold, stored digest re-verified. Inbox receipts are never touched (R-RT-2).
-- Locking: row locks (SKIP LOCKED) on the batch's events and deliveries; others proceed.
-- SQLSTATEs: 22023 older_than NULL or negative, max_rows outside 1..100000.
-- Design notes (steps, skip reasons, time): docs/retention.md#outboxarchive_events
-- Caller: outbox_retention.
CREATE OR REPLACE FUNCTION outbox.archive_events(p_older_than interval, p_max_rows integer DEFAULT 1000)
 RETURNS TABLE(run_id uuid, archived integer, skipped integer, archived_set_sha256 text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_run      uuid := pg_catalog.gen_random_uuid();
    v_cutoff   timestamptz;
    v_ids      uuid[];
    v_ok       uuid[];
    v_open     integer := 0;
    v_unres    integer := 0;
    v_held     integer := 0;
    v_mismatch integer := 0;
    v_dig      record;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '0' THEN
        RAISE EXCEPTION 'archive_events: older_than must be a non-negative interval'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'archive_events: max_rows must be between 1 and 100000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cutoff := pg_catalog.now() - p_older_than;

    -- 1. The batch: old, every delivery terminal, no unresolved quarantine, no active hold.
    SELECT pg_catalog.array_agg(b.event_id ORDER BY b.created_at, b.event_id) INTO v_ids
      FROM (SELECT e.event_id, e.created_at
              FROM outbox.outbox_events e
             WHERE e.created_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries d
                                WHERE d.event_id = e.event_id AND d.status NOT IN ('acknowledged', 'quarantined'))
               AND NOT EXISTS (SELECT 1 FROM outbox.outbox_quarantine q
                                WHERE q.event_id = e.event_id AND q.acknowledged_at IS NULL)
               AND NOT EXISTS (SELECT 1 FROM outbox.legal_holds h
                                WHERE h.event_id = e.event_id AND h.released_at IS NULL)
             ORDER BY e.created_at, e.event_id
             LIMIT p_max_rows
               FOR UPDATE OF e SKIP LOCKED) b;
    v_ids := coalesce(v_ids, '{}');

    -- 2. Lock the batch's deliveries (a concurrent state change waits for this run), then
    -- 3. re-check in a fresh statement: what changed before the locks were granted drops out.
    PERFORM 1 FROM outbox.outbox_deliveries d WHERE d.event_id = ANY (v_ids)
      ORDER BY d.destination, d.event_id FOR UPDATE;
    SELECT coalesce(pg_catalog.array_agg(i.id ORDER BY i.id), '{}') INTO v_ids
      FROM pg_catalog.unnest(v_ids) AS i(id)
     WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries d
                        WHERE d.event_id = i.id AND d.status NOT IN ('acknowledged', 'quarantined'))
       AND NOT EXISTS (SELECT 1 FROM outbox.outbox_quarantine q WHERE q.event_id = i.id AND q.acknowledged_at IS NULL)
       AND NOT EXISTS (SELECT 1 FROM outbox.legal_holds h WHERE h.event_id = i.id AND h.released_at IS NULL);

    -- Old events that are not eligible, reported per reason (first reason wins). Driven by the
    -- small sets (open deliveries, unresolved quarantine, active holds), not by the event table.
    WITH blocked AS (
        SELECT d.event_id, 1 AS pri FROM outbox.outbox_deliveries d WHERE d.status NOT IN ('acknowledged', 'quarantined')
        UNION ALL
        SELECT q.event_id, 2 FROM outbox.outbox_quarantine q WHERE q.acknowledged_at IS NULL
        UNION ALL
        SELECT h.event_id, 3 FROM outbox.legal_holds h WHERE h.released_at IS NULL
    ), r AS MATERIALIZED (
        SELECT b.event_id, pg_catalog.min(b.pri) AS pri
          FROM blocked b
          JOIN outbox.outbox_events e ON e.event_id = b.event_id
         WHERE e.created_at < v_cutoff
         GROUP BY b.event_id
    ), reported AS (
        INSERT INTO outbox.archive_run_skips (run_id, event_id, reason, detail)
        SELECT v_run, r.event_id,
               CASE r.pri WHEN 1 THEN 'open_delivery' WHEN 2 THEN 'unresolved_quarantine' ELSE 'legal_hold' END, NULL
          FROM r ORDER BY r.event_id LIMIT p_max_rows
        RETURNING 1
    )
    SELECT pg_catalog.count(*) FILTER (WHERE r.pri = 1), pg_catalog.count(*) FILTER (WHERE r.pri = 2),
           pg_catalog.count(*) FILTER (WHERE r.pri = 3)
      INTO v_open, v_unres, v_held
      FROM r; -- (reported, a data-modifying WITH, always runs to completion)

    -- 4. Digest re-verification with the database's own canonicalizer: mismatches are skipped.
    WITH chk AS MATERIALIZED (
        SELECT e.event_id, outbox._archive_digest_problem(e) AS problem
          FROM outbox.outbox_events e WHERE e.event_id = ANY (v_ids)
    ), reported AS (
        INSERT INTO outbox.archive_run_skips (run_id, event_id, reason, detail)
        SELECT v_run, c.event_id, 'digest_mismatch', c.problem FROM chk c WHERE c.problem IS NOT NULL
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT coalesce(pg_catalog.array_agg(c.event_id ORDER BY c.event_id) FILTER (WHERE c.problem IS NULL), '{}'),
           pg_catalog.count(*) FILTER (WHERE c.problem IS NOT NULL)
      INTO v_ok, v_mismatch
      FROM chk c;

    -- 5. Copy into the archive (complete rows; the child tables as row images, so columns added
    --    to a hot table later are archived as well).
    INSERT INTO outbox.archived_events
        (event_id, run_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
         delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest, aggregate_id,
         aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id, correlation_id, causation_id,
         operation_id, event_payload, event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at,
         created_at, event_envelope_canonical, published_at)
    SELECT e.event_id, v_run, e.event_type, e.schema_version, e.delivery_set_version, e.delivery_set_definition_schema_version,
           e.delivery_set_definition_digest_algorithm_version, e.delivery_set_definition_digest, e.aggregate_id,
           e.aggregate_revision, e.tenant_kind, e.tenant_id, e.workspace_id, e.project_id, e.correlation_id, e.causation_id,
           e.operation_id, e.event_payload, e.event_envelope_digest_algorithm_version, e.event_envelope_sha256, e.occurred_at,
           e.created_at,
           coalesce(e.event_envelope_canonical, outbox.jcs_canonicalize(outbox._event_envelope(e)::json)),
           p.published_at
      FROM outbox.outbox_events e
      LEFT JOIN outbox.outbox_publications p ON p.event_id = e.event_id
     WHERE e.event_id = ANY (v_ok);
    INSERT INTO outbox.archived_deliveries (destination, event_id, run_id, status, row_image)
    SELECT d.destination, d.event_id, v_run, d.status, pg_catalog.to_jsonb(d)
      FROM outbox.outbox_deliveries d WHERE d.event_id = ANY (v_ok);
    INSERT INTO outbox.archived_attempt_starts (attempt_id, run_id, destination, event_id, row_image)
    SELECT s.attempt_id, v_run, s.destination, s.event_id, pg_catalog.to_jsonb(s)
      FROM outbox.outbox_delivery_attempt_starts s WHERE s.event_id = ANY (v_ok);
    INSERT INTO outbox.archived_attempt_finishes (attempt_id, run_id, event_id, row_image)
    SELECT f.attempt_id, v_run, s.event_id, pg_catalog.to_jsonb(f)
      FROM outbox.outbox_delivery_attempt_finishes f
      JOIN outbox.outbox_delivery_attempt_starts s ON s.attempt_id = f.attempt_id
     WHERE s.event_id = ANY (v_ok);
    INSERT INTO outbox.archived_quarantine (run_id, destination, event_id, row_image)
    SELECT v_run, q.destination, q.event_id, pg_catalog.to_jsonb(q)
      FROM outbox.outbox_quarantine q WHERE q.event_id = ANY (v_ok);

    -- 6. Remove from the hot tables (children first), authorized for this run only.
    PERFORM pg_catalog.set_config('pgoutbox.archive_run', v_run::text, true);
    DELETE FROM outbox.outbox_delivery_attempt_finishes f
     USING outbox.outbox_delivery_attempt_starts s
     WHERE s.attempt_id = f.attempt_id AND s.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_quarantine q WHERE q.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_delivery_attempt_starts s WHERE s.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_deliveries d WHERE d.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_publications p WHERE p.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_events e WHERE e.event_id = ANY (v_ok);
    PERFORM pg_catalog.set_config('pgoutbox.archive_run', '', true);

    -- 7. The run's immutable audit row, from what the archive now holds.
    SELECT * INTO v_dig FROM outbox._archive_run_digests(v_run);
    INSERT INTO outbox.archive_runs
        (run_id, run_by, started_at, finished_at, older_than, max_rows, cutoff, archived, skipped,
         skipped_open_delivery, skipped_unresolved_quarantine, skipped_legal_hold, skipped_digest_mismatch,
         deliveries, attempt_starts, attempt_finishes, quarantine_rows, oldest_created_at, newest_created_at,
         archived_set_sha256, content_sha256)
    SELECT v_run, session_user, pg_catalog.now(), pg_catalog.clock_timestamp(), p_older_than, p_max_rows,
           v_cutoff, v_dig.events, v_open + v_unres + v_held + v_mismatch,
           v_open, v_unres, v_held, v_mismatch,
           v_dig.deliveries, v_dig.attempt_starts, v_dig.attempt_finishes, v_dig.quarantine_rows,
           (SELECT pg_catalog.min(a.created_at) FROM outbox.archived_events a WHERE a.run_id = v_run),
           (SELECT pg_catalog.max(a.created_at) FROM outbox.archived_events a WHERE a.run_id = v_run),
           v_dig.archived_set_sha256, v_dig.content_sha256;

    RETURN QUERY SELECT v_run, v_dig.events, v_open + v_unres + v_held + v_mismatch, v_dig.archived_set_sha256;
END
$function$;

COMMENT ON FUNCTION outbox.archive_events(interval, integer) IS
    'Retention: move up to max_rows old, terminal, unheld, digest-verified events with their deliveries, attempts and quarantine rows into the immutable archive; one audit row per run (SPEC R-RT-1..4). Caller: outbox_retention.';

REVOKE ALL ON FUNCTION outbox.archive_events(interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.archive_events(interval, integer) TO outbox_retention;
