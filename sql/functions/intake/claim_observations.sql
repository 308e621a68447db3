-- intake.claim_observations(worker text, consumer_name text, batch_size int, lease interval)
--   RETURNS TABLE (observation_id uuid, accepted_at timestamptz, lease_token uuid,
--                  accepted_envelope jsonb, accepted_envelope_sha256 text)
--   (public, SPEC R-OB-4, §13; HP-1)
-- Purpose: lease up to batch_size accepted observations of a registered projector consumer to
--   worker, in (acceptedAt, observationId) order: pending work rows or expired leases. The envelope
--   is NULL when the payload was purged (every projection has its receipt: only acknowledge).
-- Locking: the claimed work rows (SKIP LOCKED: concurrent claimers never wait on each other).
-- SQLSTATEs: 22023 worker not a literal, batch size outside 1..1000, lease outside 1 second..1
--   hour; OB802 consumer_name is not a registered observation projector.
-- Design notes: docs/intake.md#intakeclaim_observations
-- Caller: outbox_observation_projector.
CREATE OR REPLACE FUNCTION intake.claim_observations(p_worker text, p_consumer_name text, p_batch_size integer, p_lease interval)
 RETURNS TABLE(observation_id uuid, accepted_at timestamp with time zone, lease_token uuid, accepted_envelope jsonb, accepted_envelope_sha256 text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    IF p_worker IS NULL OR p_worker !~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$' THEN
        RAISE EXCEPTION 'claim_observations: worker must be a literal' USING ERRCODE = '22023';
    END IF;
    IF p_batch_size IS NULL OR p_batch_size NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim_observations: batch size must be 1..1000' USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'claim_observations: lease must be 1 second..1 hour' USING ERRCODE = '22023';
    END IF;
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- 42501 unless bound to the calling role (R-SEC-5)
    IF NOT EXISTS (SELECT 1 FROM intake.observation_projectors AS p WHERE p.consumer_name = p_consumer_name) THEN
        RAISE EXCEPTION 'claim_observations: % is not a registered observation projector', pg_catalog.left(coalesce(p_consumer_name, 'NULL'), 100)
            USING ERRCODE = 'OB802',
                  HINT = 'the registrar registers it: SELECT intake.register_observation_projector(consumer_name, projection_name, projection_version)';
    END IF;
    RETURN QUERY
    WITH c AS (
        SELECT d.consumer_name, d.observation_id
          FROM intake.observation_deliveries AS d
         WHERE d.consumer_name = p_consumer_name AND d.status <> 'acknowledged'
           AND (d.status = 'pending' OR d.lease_expires_at <= v_now)
         ORDER BY d.accepted_at, d.observation_id
         LIMIT p_batch_size
           FOR UPDATE SKIP LOCKED
    ), u AS (
        UPDATE intake.observation_deliveries AS d
           SET status = 'leased', lease_token = pg_catalog.gen_random_uuid(), lease_owner = p_worker,
               lease_expires_at = v_now + p_lease, attempts = d.attempts + 1
          FROM c
         WHERE d.consumer_name = c.consumer_name AND d.observation_id = c.observation_id
        RETURNING d.observation_id, d.accepted_at, d.lease_token
    )
    SELECT u.observation_id, u.accepted_at, u.lease_token, o.accepted_envelope, i.accepted_envelope_sha256
      FROM u
      JOIN intake.observation_ids AS i ON i.observation_id = u.observation_id
      LEFT JOIN intake.observations AS o ON o.observation_id = u.observation_id
     ORDER BY u.accepted_at, u.observation_id;
END
$function$;

COMMENT ON FUNCTION intake.claim_observations(text, text, integer, interval) IS
    'Lease accepted observations of a registered projector consumer bound to the calling role (42501 otherwise, R-SEC-5) in (acceptedAt, observationId) order under fenced leases (SPEC R-OB-4). Caller: outbox_observation_projector.';

REVOKE ALL ON FUNCTION intake.claim_observations(text, text, integer, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.claim_observations(text, text, integer, interval) TO outbox_observation_projector;
