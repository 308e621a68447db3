-- outbox.claim_rebuild_sources(p_build_id uuid, p_build_token uuid, p_batch_size integer)
--   RETURNS TABLE(source_kind text, source_id uuid, envelope jsonb, envelope_sha256 text)  (public, R-PV-1)
-- Purpose: hand the next batch of rebuild sources to a live shadow build, each exactly once per
--   build, read only from outbox.event_source and accepted observations (never append_event or
--   the delivery tables), in one order over both kinds: (source_at, source_kind, source_id). A
--   ledger row per handed-out source and the build's cursor advance in the same set-based
--   statement; a one-minute rescan behind the cursor picks up late commits. A frozen build hands
--   out only the boundary members its ledger lacks, then OB803 (later sources: dual-apply).
-- Locking: the build row FOR UPDATE (token fence; concurrent claimers of one build serialise and
--   never get the same source; REPEATABLE READ callers may get 40001).
-- SQLSTATEs: 22023 batch_size outside 1..1000; OB001 no live build with this id and token;
--   OB803 a frozen build whose boundary is completely handed out.
-- Caller: outbox_projector (SECURITY DEFINER).
-- Design notes: docs/projection-versions.md#outboxclaim_rebuild_sources
CREATE OR REPLACE FUNCTION outbox.claim_rebuild_sources(p_build_id uuid, p_build_token uuid, p_batch_size integer)
 RETURNS TABLE(source_kind text, source_id uuid, envelope jsonb, envelope_sha256 text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_cursor   timestamptz;
    v_from     timestamptz;
    v_state    text;
    v_boundary uuid;
BEGIN
    IF p_batch_size IS NULL OR p_batch_size < 1 OR p_batch_size > 1000 THEN
        RAISE EXCEPTION 'claim rebuild sources: batch_size must be 1..1000' USING ERRCODE = '22023';
    END IF;
    SELECT b.cursor_at, b.state INTO v_cursor, v_state
      FROM outbox.projection_builds AS b
     WHERE b.build_id = p_build_id AND b.build_token = p_build_token AND b.state IN ('building', 'frozen')
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencing rejected: no live shadow build % with this token', p_build_id
            USING ERRCODE = 'OB001',
                  DETAIL = 'the build is unknown, abandoned, or its token was rotated by a later start_shadow_build',
                  HINT = 'start a new build with outbox.start_shadow_build (SPEC R-PV-1)';
    END IF;
    IF v_state = 'frozen' THEN
        SELECT c.boundary_id INTO STRICT v_boundary FROM outbox.cutover_boundaries AS c WHERE c.build_id = p_build_id;
        RETURN QUERY
        WITH keys AS (
            SELECT m.source_kind AS k, m.source_id AS id, m.source_at AS at
              FROM outbox.cutover_boundary_members AS m
             WHERE m.boundary_id = v_boundary
               AND NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                                WHERE l.build_id = p_build_id AND l.source_kind = m.source_kind AND l.source_id = m.source_id)
             ORDER BY m.source_at, m.source_kind, m.source_id
             LIMIT p_batch_size
        ), cand AS (
            SELECT k.k, k.id, k.at, e.envelope AS env, e.event_envelope_sha256 AS sha
              FROM keys AS k
              JOIN outbox.event_source AS e ON e.event_id = k.id
             WHERE k.k = 'event'
            UNION ALL
            SELECT k.k, k.id, k.at, o.accepted_envelope, o.accepted_envelope_sha256
              FROM keys AS k
              JOIN intake.observations AS o ON o.observation_id = k.id
             WHERE k.k = 'observation'
        ), ins AS (
            INSERT INTO outbox.projection_build_sources (build_id, source_kind, source_id, source_at)
            SELECT p_build_id, c.k, c.id, c.at FROM cand AS c
            RETURNING 1 AS one
        ), adv AS (
            UPDATE outbox.projection_builds AS b
               SET cursor_at = GREATEST(b.cursor_at, (SELECT max(c.at) FROM cand AS c)),
                   sources_claimed = b.sources_claimed + (SELECT count(*) FROM ins)
             WHERE b.build_id = p_build_id
        )
        SELECT c.k, c.id, c.env, c.sha FROM cand AS c ORDER BY c.at, c.k, c.id;
        RETURN;  -- zero rows once the whole boundary is handed out (later sources: dual-apply)
    END IF;
    v_from := coalesce(v_cursor - interval '1 minute', '-infinity'::timestamptz);

    RETURN QUERY
    -- keys first (no envelope is built for a source that is not handed out), then the envelopes
    -- of the chosen ones by primary key
    WITH keys AS (
        SELECT s.k, s.id, s.at
          FROM (SELECT 'event'::text AS k, e.event_id AS id, e.created_at AS at
                  FROM outbox.event_source AS e
                 WHERE e.created_at >= v_from
                UNION ALL
                SELECT 'observation'::text, o.observation_id, o.accepted_at
                  FROM intake.observations AS o
                 WHERE o.accepted_at >= v_from) AS s
         WHERE NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                            WHERE l.build_id = p_build_id AND l.source_kind = s.k AND l.source_id = s.id)
         ORDER BY s.at, s.k, s.id
         LIMIT p_batch_size
    ), cand AS (
        SELECT k.k, k.id, k.at, e.envelope AS env, e.event_envelope_sha256 AS sha
          FROM keys AS k
          JOIN outbox.event_source AS e ON e.event_id = k.id
         WHERE k.k = 'event'
        UNION ALL
        SELECT k.k, k.id, k.at, o.accepted_envelope, o.accepted_envelope_sha256
          FROM keys AS k
          JOIN intake.observations AS o ON o.observation_id = k.id
         WHERE k.k = 'observation'
    ), ins AS (
        INSERT INTO outbox.projection_build_sources (build_id, source_kind, source_id, source_at)
        SELECT p_build_id, c.k, c.id, c.at FROM cand AS c
        RETURNING 1 AS one
    ), adv AS (
        UPDATE outbox.projection_builds AS b
           SET cursor_at = GREATEST(b.cursor_at, (SELECT max(c.at) FROM cand AS c)),
               sources_claimed = b.sources_claimed + (SELECT count(*) FROM ins)
         WHERE b.build_id = p_build_id
    )
    SELECT c.k, c.id, c.env, c.sha FROM cand AS c ORDER BY c.at, c.k, c.id;
END
$function$;

COMMENT ON FUNCTION outbox.claim_rebuild_sources(uuid, uuid, integer) IS
    'Next batch of rebuild sources of a live shadow build (events of outbox.event_source and accepted observations), each once per build, in (source_at, source_kind, source_id) order; zero rows when nothing is left to hand out (a frozen build: only its missing boundary members); OB001 stale or unknown build token; 22023 batch outside 1..1000. SPEC R-PV-1, R-PV-2, §13. Caller: outbox_projector.';

REVOKE ALL ON FUNCTION outbox.claim_rebuild_sources(uuid, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.claim_rebuild_sources(uuid, uuid, integer) TO outbox_projector;
