-- Projection versions on the status page, in /metrics and in outboxctl (issue 24 item 6, SPEC
-- R-PV-5): one read function for outbox_auditor listing every registered projection version with
-- its state, its live build and the build's progress. New function only.
SET LOCAL ROLE outbox_owner;

-- outbox.console_projection_versions(p_limit integer)
-- RETURNS TABLE (projection_name text, projection_version integer, state text,
--   semantic_definition_sha256 text, registered_at timestamptz, row_source text,
--   build_id uuid, build_state text, build_started_at timestamptz, sources_built bigint)
-- (public, status page and outboxctl, issue 24 item 6; SPEC R-PV-5)
-- Purpose: every registered projection version (at most p_limit, by name and version) with its
--   state (active | shadow | frozen | retired), semantic digest, content row source, and its most
--   recent build (live or not): id, state, start and how many sources it was handed. Never a
--   build token.
-- SQLSTATEs: 22023 a limit outside 1..1000. Locking: none. Callers: outbox_auditor.
CREATE FUNCTION outbox.console_projection_versions(p_limit integer)
RETURNS TABLE (projection_name text, projection_version integer, state text, semantic_definition_sha256 text,
               registered_at timestamptz, row_source text, build_id uuid, build_state text,
               build_started_at timestamptz, sources_built bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'console_projection_versions: a limit 1..1000 is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT v.projection_name, v.projection_version, v.state, v.semantic_definition_sha256, v.registered_at,
           s.row_source::text, b.build_id, b.state, b.started_at, b.sources_claimed
      FROM outbox.projection_versions AS v
      LEFT JOIN outbox.projection_row_sources AS s
             ON s.projection_name = v.projection_name AND s.projection_version = v.projection_version
      LEFT JOIN LATERAL (SELECT pb.build_id, pb.state, pb.started_at, pb.sources_claimed
                           FROM outbox.projection_builds AS pb
                          WHERE pb.projection_name = v.projection_name AND pb.projection_version = v.projection_version
                          ORDER BY pb.started_at DESC, pb.build_id DESC LIMIT 1) AS b ON true
     ORDER BY v.projection_name COLLATE "C", v.projection_version
     LIMIT p_limit;
END
$fn$;
COMMENT ON FUNCTION outbox.console_projection_versions(integer) IS
    'Registered projection versions with state, row source and latest build progress, no build token (SPEC R-PV-5). Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.console_projection_versions(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_projection_versions(integer) TO outbox_auditor;


RESET ROLE;
