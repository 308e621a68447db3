-- inbox.record_observation_receipt(consumer_name text, projection_name text, projection_version
--   int, observation_id uuid, accepted_envelope_sha256 text) RETURNS TABLE (outcome text)
--   (public, SPEC R-OB-4, R-SEC-5, §13)
-- Purpose: the observation projector records, in the same transaction as its mutation, that
--   (consumer_name, projection_name, projection_version) applied the accepted observation with
--   that envelope digest. Insert-or-compare: new | existing (the same digest was recorded before:
--   the mutation must not be applied again); a receipt of another digest for the same key raises
--   OB301.
-- Checks, in this order: the literals (22023); the caller acts only as itself (the calling role
--   is a member of the role bound to consumer_name, inbox.bind_consumer_role: 42501); the
--   (consumer, projection, version) is a registered observation projector (OB802); an existing
--   receipt of the key (same digest: existing; another: OB301); the observation was accepted
--   with exactly that envelope digest (OB002: unknown id or another digest).
-- Locking: the receipt's primary key (a concurrent recorder of the same key waits, then
--   compares). Caller: the projector's consumer role (bound like any consumer).
CREATE OR REPLACE FUNCTION inbox.record_observation_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer, p_observation_id uuid, p_accepted_envelope_sha256 text)
 RETURNS TABLE(outcome text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_have text;
BEGIN
    IF p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._-]{0,99}$'
       OR p_projection_name IS NULL OR p_projection_name !~ '^[a-z0-9][a-z0-9._-]{0,99}$'
       OR p_projection_version IS NULL OR p_projection_version < 1 OR p_observation_id IS NULL
       OR p_accepted_envelope_sha256 IS NULL OR p_accepted_envelope_sha256 !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'record_observation_receipt: argument out of form' USING ERRCODE = '22023',
            HINT = 'consumer and projection names are literals, the version >= 1, the digest 64 lower-case hex';
    END IF;
    PERFORM inbox._inbox_check_caller(p_consumer_name);
    IF NOT EXISTS (SELECT 1 FROM intake.observation_projectors AS p
                    WHERE p.consumer_name = p_consumer_name AND p.projection_name = p_projection_name
                      AND p.projection_version = p_projection_version) THEN
        RAISE EXCEPTION 'record_observation_receipt: % / % version % is not a registered observation projector',
                        p_consumer_name, p_projection_name, p_projection_version
            USING ERRCODE = 'OB802';
    END IF;
    -- insert-or-compare: the insert only for the accepted digest (a concurrent recorder of the
    -- key makes it wait, then do nothing); otherwise the stored receipt decides
    INSERT INTO inbox.observation_receipts (consumer_name, projection_name, projection_version, observation_id,
                                            digest_algorithm_version, accepted_envelope_sha256)
    SELECT p_consumer_name, p_projection_name, p_projection_version, p_observation_id, 'jcs-sha256-v1', p_accepted_envelope_sha256
     WHERE EXISTS (SELECT 1 FROM intake.observation_ids AS o
                    WHERE o.observation_id = p_observation_id AND o.accepted_envelope_sha256 = p_accepted_envelope_sha256)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN QUERY SELECT 'new'::text;
        RETURN;
    END IF;
    SELECT r.accepted_envelope_sha256 INTO v_have FROM inbox.observation_receipts AS r
     WHERE r.consumer_name = p_consumer_name AND r.projection_name = p_projection_name
       AND r.projection_version = p_projection_version AND r.observation_id = p_observation_id;
    IF v_have = p_accepted_envelope_sha256 THEN
        RETURN QUERY SELECT 'existing'::text;
        RETURN;
    ELSIF v_have IS NOT NULL THEN
        RAISE EXCEPTION 'record_observation_receipt: observation % has a receipt of another digest', p_observation_id
            USING ERRCODE = 'OB301';
    END IF;
    RAISE EXCEPTION 'record_observation_receipt: no accepted observation % with that envelope digest', p_observation_id
        USING ERRCODE = 'OB002';
END
$function$;

COMMENT ON FUNCTION inbox.record_observation_receipt(text, text, integer, uuid, text) IS
    'Record the observation projector''s receipt (insert-or-compare: new | existing; OB301 another digest, OB002 not the accepted digest, OB802 unregistered projector, 42501 not bound) (SPEC R-OB-4).';

REVOKE ALL ON FUNCTION inbox.record_observation_receipt(text, text, integer, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_observation_receipt(text, text, integer, uuid, text) TO outbox_consumer;
