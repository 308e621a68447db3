-- intake.verify_purge_run(run_id uuid) RETURNS TABLE (run_id uuid, verified bool, problem text)
--   (public, SPEC R-OB-7, §13)
-- Purpose: re-check a purge run from its evidence: the run row exists; its markers are exactly
--   `purged` ids; purged_set_sha256 recomputes from the markers; no payload of a marked id
--   remains; every marked id is still in the id registry with the marker's acceptedAt and
--   acceptedEnvelopeSha256. problem names the first failed check (NULL when verified).
-- Locking: none (reads). SQLSTATEs: none (an unknown run is verified = false).
-- Caller: outbox_auditor, outbox_retention.
CREATE OR REPLACE FUNCTION intake.verify_purge_run(p_run_id uuid)
 RETURNS TABLE(run_id uuid, verified boolean, problem text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_run   intake.purge_runs;
    v_n     integer;
    v_sha   text;
BEGIN
    SELECT r.* INTO v_run FROM intake.purge_runs r WHERE r.run_id = p_run_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT p_run_id, false, 'no such purge run'::text;
        RETURN;
    END IF;
    SELECT pg_catalog.count(*)::integer,
           pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
               '[' || coalesce(pg_catalog.string_agg('{"acceptedEnvelopeSha256":"' || m.accepted_envelope_sha256
                                                     || '","observationId":"' || m.observation_id::text || '"}', ','
                                                     ORDER BY m.observation_id), '') || ']', 'UTF8')), 'hex')
      INTO v_n, v_sha
    FROM intake.observation_purge_markers m WHERE m.run_id = p_run_id;
    IF v_n <> v_run.purged THEN
        RETURN QUERY SELECT p_run_id, false, pg_catalog.format('%s markers for %s purged', v_n, v_run.purged);
    ELSIF v_sha <> v_run.purged_set_sha256 THEN
        RETURN QUERY SELECT p_run_id, false, 'purged_set_sha256 does not recompute from the markers'::text;
    ELSIF EXISTS (SELECT 1 FROM intake.observation_purge_markers m JOIN intake.observations o ON o.observation_id = m.observation_id
                  WHERE m.run_id = p_run_id) THEN
        RETURN QUERY SELECT p_run_id, false, 'a payload of a purged id is still present'::text;
    ELSIF EXISTS (SELECT 1 FROM intake.observation_purge_markers m
                  LEFT JOIN intake.observation_ids r ON r.observation_id = m.observation_id
                  WHERE m.run_id = p_run_id
                    AND (r.observation_id IS NULL OR r.accepted_at <> m.accepted_at
                         OR r.accepted_envelope_sha256 <> m.accepted_envelope_sha256)) THEN
        RETURN QUERY SELECT p_run_id, false, 'a marker does not match the id registry'::text;
    ELSIF EXISTS (SELECT 1 FROM intake.observation_purge_markers m
                  WHERE m.run_id = p_run_id
                    AND (m.accepted_at >= v_run.cutoff OR m.purged_at > v_run.finished_at)) THEN
        RETURN QUERY SELECT p_run_id, false, 'a marker is not older than the run''s cutoff or was not written by the run'::text;
    ELSIF EXISTS (SELECT 1 FROM intake.observation_purge_markers m
                  JOIN intake.observation_projectors p ON p.registered_at <= m.purged_at
                  WHERE m.run_id = p_run_id
                    AND NOT EXISTS (SELECT 1 FROM inbox.observation_receipts r
                                    WHERE r.consumer_name = p.consumer_name AND r.projection_name = p.projection_name
                                      AND r.projection_version = p.projection_version
                                      AND r.observation_id = m.observation_id
                                      AND r.accepted_envelope_sha256 = m.accepted_envelope_sha256
                                      AND r.recorded_at <= m.purged_at)) THEN
        RETURN QUERY SELECT p_run_id, false, 'a purged observation lacked a registered projector''s receipt at purge time'::text;
    ELSIF EXISTS (SELECT 1 FROM intake.observation_purge_markers m
                  JOIN outbox.legal_holds h ON h.event_id = m.observation_id
                  WHERE m.run_id = p_run_id
                    AND h.set_at <= m.purged_at AND (h.released_at IS NULL OR h.released_at > m.purged_at)) THEN
        RETURN QUERY SELECT p_run_id, false, 'a purged observation was under a legal hold at purge time'::text;
    ELSE
        RETURN QUERY SELECT p_run_id, true, NULL::text;
    END IF;
END
$function$;

COMMENT ON FUNCTION intake.verify_purge_run(uuid) IS
    'Re-check a purge run from the immutable facts: marker count and purged_set_sha256, no payload left, registry agreement, every marker older than the cutoff and written by the run, every projector registered by then holding its receipt at purge time, no legal hold active at purge time (SPEC R-OB-7). Caller: outbox_retention, outbox_auditor.';

REVOKE ALL ON FUNCTION intake.verify_purge_run(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.verify_purge_run(uuid) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION intake.verify_purge_run(uuid) TO outbox_retention;
