-- intake.purge_observation_payloads(older_than interval, max_rows int DEFAULT 1000)
--   RETURNS TABLE (run_id uuid, purged int, skipped int, purged_set_sha256 text)
--   (public, SPEC R-OB-7, §13)
-- Purpose: the audited payload purge: removes the payload of up to max_rows observations accepted
--   before now() - older_than (oldest first) that every registered projector acknowledged with a
--   receipt and that no legal hold covers; the others are skipped. Purge markers first, then the
--   deletes, then the run row. The id registry is never touched.
-- Locking: FOR UPDATE SKIP LOCKED of the examined rows (concurrent runs take disjoint sets).
-- SQLSTATEs: 22023 older_than NULL or negative, max_rows outside 1..100000.
-- Design notes: docs/intake.md#intakepurge_observation_payloads
-- Caller: outbox_retention.
CREATE OR REPLACE FUNCTION intake.purge_observation_payloads(p_older_than interval, p_max_rows integer DEFAULT 1000)
 RETURNS TABLE(run_id uuid, purged integer, skipped integer, purged_set_sha256 text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_run     uuid := pg_catalog.gen_random_uuid();
    v_started timestamptz := pg_catalog.clock_timestamp();
    v_cutoff  timestamptz;
    v_ids     uuid[];
    v_ok      boolean[];
    v_purged  integer;
    v_sha     text;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '0' THEN
        RAISE EXCEPTION 'intake: older_than must be a non-negative interval' USING ERRCODE = '22023';
    END IF;
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'intake: max_rows must be 1..100000' USING ERRCODE = '22023';
    END IF;
    v_cutoff := pg_catalog.now() - p_older_than;

    SELECT pg_catalog.array_agg(x.observation_id ORDER BY x.accepted_at, x.observation_id),
           pg_catalog.array_agg(x.eligible ORDER BY x.accepted_at, x.observation_id)
      INTO v_ids, v_ok
    FROM (SELECT o.observation_id, o.accepted_at,
                 NOT EXISTS (SELECT 1 FROM intake.observation_projectors p
                             WHERE NOT EXISTS (SELECT 1 FROM inbox.observation_receipts r
                                               WHERE r.consumer_name = p.consumer_name AND r.projection_name = p.projection_name
                                                 AND r.projection_version = p.projection_version
                                                 AND r.observation_id = o.observation_id
                                                 AND r.accepted_envelope_sha256 = o.accepted_envelope_sha256))
                 AND NOT EXISTS (SELECT 1 FROM outbox.legal_holds h
                                 WHERE h.event_id = o.observation_id AND h.released_at IS NULL) AS eligible
          FROM intake.observations o
          WHERE o.accepted_at < v_cutoff
          ORDER BY o.accepted_at, o.observation_id
          LIMIT p_max_rows
          FOR UPDATE OF o SKIP LOCKED) x;

    INSERT INTO intake.observation_purge_markers (observation_id, run_id, accepted_at, accepted_envelope_sha256, purged_at)
    SELECT o.observation_id, v_run, o.accepted_at, o.accepted_envelope_sha256, pg_catalog.now()
    FROM unnest(v_ids, v_ok) AS u(id, ok)
    JOIN intake.observations o ON o.observation_id = u.id
    WHERE u.ok;

    DELETE FROM intake.observations o
    USING intake.observation_purge_markers m
    WHERE m.run_id = v_run AND o.observation_id = m.observation_id;
    GET DIAGNOSTICS v_purged = ROW_COUNT;

    SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
               '[' || coalesce(pg_catalog.string_agg('{"acceptedEnvelopeSha256":"' || m.accepted_envelope_sha256
                                                     || '","observationId":"' || m.observation_id::text || '"}', ','
                                                     ORDER BY m.observation_id), '') || ']', 'UTF8')), 'hex')
      INTO v_sha
    FROM intake.observation_purge_markers m WHERE m.run_id = v_run;

    INSERT INTO intake.purge_runs (run_id, run_by, started_at, finished_at, older_than, max_rows, cutoff, purged, skipped, purged_set_sha256)
    VALUES (v_run, session_user, v_started, pg_catalog.clock_timestamp(), p_older_than, p_max_rows, v_cutoff,
            v_purged, coalesce(pg_catalog.cardinality(v_ids), 0) - v_purged, v_sha);

    RETURN QUERY SELECT v_run, v_purged, coalesce(pg_catalog.cardinality(v_ids), 0) - v_purged, v_sha;
END
$function$;

COMMENT ON FUNCTION intake.purge_observation_payloads(interval, integer) IS
    'Purge payloads of old accepted observations every registered projector has a receipt for (no legal hold): markers, then deletes, then the run row with purged_set_sha256 (SPEC R-OB-7).';

REVOKE ALL ON FUNCTION intake.purge_observation_payloads(interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.purge_observation_payloads(interval, integer) TO outbox_retention;
