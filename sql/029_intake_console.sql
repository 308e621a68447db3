-- The intake on the status page and the console (issue 22 item 6; SPEC R-OB-5, R-OP-4): one read
-- function for outbox_auditor listing the most recent accepted observations without their
-- bodies. New function only.
SET LOCAL ROLE outbox_owner;

-- intake.console_observations(p_limit integer)
-- RETURNS TABLE (observation_id uuid, accepted_at timestamptz, workload_principal_id text,
--   observation_type text, observation_schema_version integer, payload_purged boolean,
--   open_projectors integer)
-- (public, status page and console, issue 22 item 6; SPEC R-OB-3, R-OB-5, R-OP-4)
-- Purpose: the p_limit most recently accepted observations, newest first by
--   (acceptedAt, observationId), with the trusted source, type and schema version, whether the
--   payload was purged (type and version are then NULL: only the id registry remains) and how many
--   projector consumers have not acknowledged it yet. Never a body, never a digest of the
--   submission: an auditor sees what arrived, not what it said.
-- Cost: an index scan of observation_ids_accepted backwards, LIMIT p_limit; primary-key lookups.
-- SQLSTATEs: 22023 a limit outside 1..1000. Locking: none.
-- Callers: outbox_auditor.
CREATE FUNCTION intake.console_observations(p_limit integer)
RETURNS TABLE (observation_id uuid, accepted_at timestamptz, workload_principal_id text, observation_type text,
               observation_schema_version integer, payload_purged boolean, open_projectors integer)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'console_observations: a limit 1..1000 is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT i.observation_id, i.accepted_at, i.workload_principal_id, o.observation_type, o.observation_schema_version,
           o.observation_id IS NULL,
           (SELECT pg_catalog.count(*)::integer FROM intake.observation_deliveries AS d
             WHERE d.observation_id = i.observation_id AND d.status <> 'acknowledged')
      FROM intake.observation_ids AS i
      LEFT JOIN intake.observations AS o ON o.observation_id = i.observation_id
     ORDER BY i.accepted_at DESC, i.observation_id DESC
     LIMIT p_limit;
END
$fn$;
COMMENT ON FUNCTION intake.console_observations(integer) IS
    'The most recent accepted observations without bodies (source, type, purge state, open projectors) for the status page and console (SPEC R-OB-5, R-OP-4). Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION intake.console_observations(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.console_observations(integer) TO outbox_auditor;


RESET ROLE;
