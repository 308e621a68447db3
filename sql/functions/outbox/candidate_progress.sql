-- outbox.candidate_progress(p_build_id uuid) RETURNS TABLE(state text, built bigint, remaining
--   bigint, lag_seconds double precision)  (public, SPEC R-PV-5, §13)
-- Purpose: where a build stands. built = sources handed out to it. building: remaining = sources
--   not handed out yet, lag = age of the oldest of them. frozen: remaining = boundary members not
--   handed out + in-filter events (boundary and later) without a shadow receipt + observations
--   without one (outbox._cutover_guards), lag = age of the oldest of those sources; state
--   'ready' when remaining = 0, else 'blocked' when the build's last cutover attempt was
--   blocked, 'catching_up' when a claim ran since the freeze, 'frozen' otherwise (ready counts
--   receipts only: leases, gaps and quarantine are judged by cutover_projection). switched and
--   abandoned builds: remaining 0, lag 0. Unknown build: no row.
-- Cost: scans every source (an operator's call). Locking: none.
-- Caller: outbox_auditor; SECURITY DEFINER (no table privileges).
CREATE OR REPLACE FUNCTION outbox.candidate_progress(p_build_id uuid)
 RETURNS TABLE(state text, built bigint, remaining bigint, lag_seconds double precision)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    b          outbox.projection_builds%ROWTYPE;
    v_boundary outbox.cutover_boundaries%ROWTYPE;
    v_guards   jsonb;
    v_rem      bigint;
    v_oldest   timestamptz;
    v_last     text;
BEGIN
    SELECT * INTO b FROM outbox.projection_builds AS x WHERE x.build_id = p_build_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF b.state IN ('switched', 'abandoned') THEN
        RETURN QUERY SELECT b.state, b.sources_claimed, 0::bigint, 0::double precision;
        RETURN;
    END IF;
    IF b.state = 'building' THEN
        SELECT pg_catalog.count(*), min(s.at) INTO v_rem, v_oldest
          FROM (SELECT 'event'::text AS k, e.event_id AS id, e.created_at AS at FROM outbox.event_source AS e
                UNION ALL
                SELECT 'observation', o.observation_id, o.accepted_at FROM intake.observations AS o) AS s
         WHERE NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                            WHERE l.build_id = p_build_id AND l.source_kind = s.k AND l.source_id = s.id);
        RETURN QUERY SELECT 'building'::text, b.sources_claimed, v_rem,
                            coalesce(extract(epoch FROM pg_catalog.now() - v_oldest)::double precision, 0);
        RETURN;
    END IF;

    SELECT * INTO STRICT v_boundary FROM outbox.cutover_boundaries AS c WHERE c.build_id = p_build_id;
    v_guards := outbox._cutover_guards(v_boundary.boundary_id, '{}'::text[]);
    v_rem := (v_guards->>'boundaryNotHandedOut')::bigint + (v_guards->>'missingReceipts')::bigint
             + (v_guards->>'missingObservationReceipts')::bigint;
    SELECT min(x.at) INTO v_oldest
      FROM (SELECT m.source_at AS at FROM outbox.cutover_boundary_members AS m
             WHERE m.boundary_id = v_boundary.boundary_id
               AND NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                                WHERE l.build_id = p_build_id AND l.source_kind = m.source_kind AND l.source_id = m.source_id)
            UNION ALL
            SELECT e.created_at FROM outbox.event_source AS e
             WHERE EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(v_boundary.source_filter->'eventTypes') AS f
                            WHERE f->>'eventType' = e.event_type AND f->>'eventSchemaVersion' = e.schema_version)
               AND NOT EXISTS (SELECT 1 FROM inbox.inbox_receipts AS r
                                WHERE r.consumer_name = v_boundary.consumer_name AND r.projection_name = v_boundary.projection_name
                                  AND r.projection_version = v_boundary.projection_version AND r.event_id = e.event_id
                                  AND r.event_envelope_sha256 = e.event_envelope_sha256)) AS x;
    SELECT p.result INTO v_last FROM outbox.cutover_readiness_proofs AS p
     WHERE p.build_id = p_build_id ORDER BY p.decided_at DESC LIMIT 1;
    RETURN QUERY SELECT
        CASE WHEN v_rem = 0 THEN 'ready'
             WHEN v_last = 'blocked' THEN 'blocked'
             WHEN EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                           WHERE l.build_id = p_build_id AND l.claimed_at > v_boundary.frozen_at) THEN 'catching_up'
             ELSE 'frozen' END,
        b.sources_claimed, v_rem,
        coalesce(extract(epoch FROM pg_catalog.now() - v_oldest)::double precision, 0);
END
$function$;

COMMENT ON FUNCTION outbox.candidate_progress(uuid) IS
    'Progress of a build: state building|frozen|catching_up|ready|switched|blocked|abandoned, built, remaining, lag_seconds; no row for an unknown build. SPEC R-PV-5, §13. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.candidate_progress(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.candidate_progress(uuid) TO outbox_auditor;
