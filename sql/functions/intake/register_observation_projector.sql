-- intake.register_observation_projector(consumer_name text, projection_name text,
--   projection_version int) RETURNS void  (public, SPEC R-OB-4, R-OB-7, §13)
-- Purpose: register an observation projector; the payload purge waits for a receipt of every
--   registered projector. Insert-or-compare (the same triple again is a no-op).
-- Locking: the primary key. SQLSTATEs: 22023 literal out of form.
-- Caller: outbox_registrar.
CREATE OR REPLACE FUNCTION intake.register_observation_projector(p_consumer_name text, p_projection_name text, p_projection_version integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._-]{0,99}$'
       OR p_projection_name IS NULL OR p_projection_name !~ '^[a-z0-9][a-z0-9._-]{0,99}$'
       OR p_projection_version IS NULL OR p_projection_version < 1 THEN
        RAISE EXCEPTION 'intake: projector literal out of form' USING ERRCODE = '22023';
    END IF;
    INSERT INTO intake.observation_projectors (consumer_name, projection_name, projection_version)
    VALUES (p_consumer_name, p_projection_name, p_projection_version)
    ON CONFLICT DO NOTHING;
END
$function$;

COMMENT ON FUNCTION intake.register_observation_projector(text, text, integer) IS
    'Register an observation projector (purge waits for its receipts); insert-or-compare (SPEC R-OB-4, R-OB-7).';

REVOKE ALL ON FUNCTION intake.register_observation_projector(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.register_observation_projector(text, text, integer) TO outbox_registrar;
