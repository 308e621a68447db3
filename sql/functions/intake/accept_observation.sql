-- intake.accept_observation(submission json)
--   RETURNS TABLE (outcome text, observation_id uuid, accepted_at timestamptz,
--                  submission_payload_sha256 text, accepted_envelope_sha256 text, sqlstate text, detail text)
--   (public, SPEC R-OB-1, R-OB-2, §13)
-- Purpose: one submission; exactly intake.accept_observations of a one-item array (the same
--   rules, the same row). SQLSTATEs: OB704 (raised); item refusals come back as the row.
-- Caller: outbox_intake.
CREATE OR REPLACE FUNCTION intake.accept_observation(p_submission json)
 RETURNS TABLE(outcome text, observation_id uuid, accepted_at timestamp with time zone, submission_payload_sha256 text, accepted_envelope_sha256 text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY SELECT a.outcome, a.observation_id, a.accepted_at, a.submission_payload_sha256,
                        a.accepted_envelope_sha256, a.sqlstate, a.detail
                 FROM intake.accept_observations(pg_catalog.json_build_array(p_submission)) AS a;
END
$function$;

COMMENT ON FUNCTION intake.accept_observation(json) IS
    'Accept one observation submission (intake.accept_observations of one item) (SPEC R-OB-1, R-OB-2).';

REVOKE ALL ON FUNCTION intake.accept_observation(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.accept_observation(json) TO outbox_intake;
