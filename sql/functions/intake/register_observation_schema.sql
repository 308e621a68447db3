-- intake.register_observation_schema(observation_type text, observation_schema_version int,
--   definition json) RETURNS text  (public, SPEC R-OB-1, §13)
-- Purpose: register the closed body schema (ObservationSchemaDefinition@1) of
--   (observation_type, observation_schema_version) and return its jcs-sha256-v1 digest;
--   insert-or-compare on the digest of the canonical definition.
-- Locking: the primary key.
-- SQLSTATEs: OB201 the definition is not canonicalizable (duplicate key, ...); OB702 definition
--   out of form, or the version registered with another definition.
-- Design notes (the definition's form): docs/intake.md#intakeregister_observation_schema
-- Caller: outbox_registrar.
CREATE OR REPLACE FUNCTION intake.register_observation_schema(p_observation_type text, p_observation_schema_version integer, p_definition json)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_canon   text;
    v_sha     text;
    v_def     jsonb;
    v_old     text;
    v_disc    text;
    v_pol     text;
    v_code    text;
    v_bad     text;
    v_m       record;
    v_n       integer;
    v_nd      integer;
    v_nfc     integer;
BEGIN
    IF p_observation_type IS NULL OR p_observation_type !~ '^[A-Za-z][A-Za-z0-9._-]{0,127}$'
       OR p_observation_schema_version IS NULL OR p_observation_schema_version NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'intake: observation type or schema version out of form'
            USING ERRCODE = 'OB702', DETAIL = 'type: 1..128 characters of [A-Za-z0-9._-] starting with a letter; version 1..1000000';
    END IF;
    -- member names (and the members the definition names) in NFC before canonicalization, so NFD
    -- and NFC spellings of one definition are one definition; names equal after NFC: OB702
    IF pg_catalog.json_typeof(p_definition) = 'object' AND pg_catalog.json_typeof(p_definition -> 'members') = 'object' THEN
        SELECT pg_catalog.count(*), pg_catalog.count(DISTINCT k.k COLLATE "C"),
               pg_catalog.count(DISTINCT normalize(k.k, NFC) COLLATE "C")
          INTO v_n, v_nd, v_nfc
          FROM pg_catalog.json_object_keys(p_definition -> 'members') AS k(k);
        IF v_n = v_nd AND v_nd <> v_nfc THEN
            RAISE EXCEPTION 'intake: observation schema member names collide after NFC normalization'
                USING ERRCODE = 'OB702', DETAIL = 'two member names are equal in NFC; a member name is stored in NFC';
        END IF;
        IF v_n = v_nd THEN
            SELECT pg_catalog.json_object_agg(t.key,
                       CASE WHEN t.key = 'members'
                                THEN (SELECT pg_catalog.json_object_agg(normalize(m.key, NFC), m.value)
                                        FROM pg_catalog.json_each(t.value) AS m)
                            WHEN t.key IN ('discriminator', 'policyVersionMember', 'normalizedCodeMember')
                                 AND pg_catalog.json_typeof(t.value) = 'string'
                                THEN pg_catalog.to_json(normalize(t.value #>> '{}', NFC))
                            ELSE t.value END)
              INTO p_definition
              FROM pg_catalog.json_each(p_definition) AS t;
        END IF;
    END IF;
    v_canon := outbox.jcs_canonicalize(p_definition);
    v_sha := pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(v_canon, 'UTF8')), 'hex');
    v_def := v_canon::jsonb;

    IF pg_catalog.jsonb_typeof(v_def) <> 'object' OR pg_catalog.jsonb_typeof(v_def->'members') IS DISTINCT FROM 'object'
       OR EXISTS (SELECT 1 FROM pg_catalog.jsonb_object_keys(v_def) k
                  WHERE k NOT IN ('members', 'discriminator', 'policyVersionMember', 'normalizedCodeMember')) THEN
        RAISE EXCEPTION 'intake: observation schema definition out of form'
            USING ERRCODE = 'OB702', DETAIL = 'an object with "members" (object) and optional "discriminator", "policyVersionMember", "normalizedCodeMember"';
    END IF;
    IF (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v_def->'members')) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'intake: observation schema needs 1..200 members' USING ERRCODE = 'OB702';
    END IF;
    FOR v_m IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(v_def->'members') e LOOP
        v_bad := CASE
            WHEN pg_catalog.char_length(v_m.key) NOT BETWEEN 1 AND 64 OR v_m.key ~ '[\u0001-\u001f\u007f-\u009f]'
                THEN 'member name must be 1..64 characters without control characters'
            WHEN pg_catalog.jsonb_typeof(v_m.value) <> 'object' THEN 'member definition is not an object'
            WHEN EXISTS (SELECT 1 FROM pg_catalog.jsonb_object_keys(v_m.value) k
                         WHERE k NOT IN ('type', 'required', 'nullable', 'minLength', 'maxLength', 'minimum', 'maximum', 'values', 'branches'))
                THEN 'unknown key in member definition'
            WHEN NOT coalesce(v_m.value->>'type' IN ('string', 'integer', 'boolean', 'uuid', 'timestamp', 'enum'), false)
                THEN 'type must be string|integer|boolean|uuid|timestamp|enum'
            WHEN coalesce(pg_catalog.jsonb_typeof(v_m.value->'required'), 'boolean') <> 'boolean'
              OR coalesce(pg_catalog.jsonb_typeof(v_m.value->'nullable'), 'boolean') <> 'boolean' THEN 'required/nullable must be booleans'
            WHEN (v_m.value ? 'minLength' OR v_m.value ? 'maxLength') AND v_m.value->>'type' NOT IN ('string', 'enum')
                THEN 'minLength/maxLength only for string and enum members'
            WHEN (v_m.value ? 'minimum' OR v_m.value ? 'maximum') AND v_m.value->>'type' <> 'integer'
                THEN 'minimum/maximum only for integer members'
            WHEN coalesce(pg_catalog.jsonb_typeof(v_m.value->'minLength'), 'number') <> 'number'
              OR coalesce(pg_catalog.jsonb_typeof(v_m.value->'maxLength'), 'number') <> 'number'
              OR coalesce(pg_catalog.jsonb_typeof(v_m.value->'minimum'), 'number') <> 'number'
              OR coalesce(pg_catalog.jsonb_typeof(v_m.value->'maximum'), 'number') <> 'number' THEN 'bounds must be integers'
            WHEN coalesce((v_m.value->>'minLength')::bigint, 0) < 0
              OR coalesce((v_m.value->>'maxLength')::bigint, 256) > 4096
              OR coalesce((v_m.value->>'minLength')::bigint, 0) > coalesce((v_m.value->>'maxLength')::bigint, 256)
                THEN 'string bounds must satisfy 0 <= minLength <= maxLength <= 4096'
            WHEN (v_m.value->>'minimum')::bigint > (v_m.value->>'maximum')::bigint THEN 'minimum above maximum'
            WHEN (v_m.value->>'type' = 'enum') <> (v_m.value ? 'values') THEN 'values exactly for enum members'
            WHEN v_m.value ? 'values' AND (pg_catalog.jsonb_typeof(v_m.value->'values') <> 'array'
                  OR pg_catalog.jsonb_array_length(v_m.value->'values') = 0
                  OR EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(v_m.value->'values') x
                             WHERE pg_catalog.jsonb_typeof(x) <> 'string' OR x #>> '{}' !~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$')
                  OR (SELECT pg_catalog.count(*) <> pg_catalog.count(DISTINCT x) FROM pg_catalog.jsonb_array_elements(v_m.value->'values') x))
                THEN 'values must be distinct literals [A-Za-z0-9._:-]'
            WHEN v_m.value ? 'branches' AND (pg_catalog.jsonb_typeof(v_m.value->'branches') <> 'array'
                  OR pg_catalog.jsonb_array_length(v_m.value->'branches') = 0
                  OR EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(v_m.value->'branches') x WHERE pg_catalog.jsonb_typeof(x) <> 'string'))
                THEN 'branches must be a non-empty array of discriminator values'
            ELSE NULL END;
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'intake: observation schema member % invalid', v_m.key
                USING ERRCODE = 'OB702', DETAIL = v_bad;
        END IF;
    END LOOP;

    v_disc := v_def->>'discriminator';
    v_pol := v_def->>'policyVersionMember';
    v_code := v_def->>'normalizedCodeMember';
    v_bad := CASE
        WHEN v_def ? 'discriminator' AND NOT coalesce((v_def->'members'->v_disc->>'type') = 'enum'
                 AND coalesce((v_def->'members'->v_disc->>'required')::boolean, false)
                 AND NOT coalesce((v_def->'members'->v_disc->>'nullable')::boolean, false)
                 AND NOT (v_def->'members'->v_disc ? 'branches'), false)
            THEN 'discriminator must name a required, non-nullable enum member without branches'
        WHEN NOT (v_def ? 'discriminator') AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_each(v_def->'members') e WHERE e.value ? 'branches')
            THEN 'branches need a discriminator'
        WHEN v_def ? 'discriminator' AND EXISTS (
                SELECT 1 FROM pg_catalog.jsonb_each(v_def->'members') e, pg_catalog.jsonb_array_elements_text(e.value->'branches') b
                WHERE NOT (v_def->'members'->v_disc->'values') ? b)
            THEN 'a branch is not a value of the discriminator'
        WHEN v_def ? 'policyVersionMember' AND NOT coalesce(v_def->'members'->v_pol->>'type' IN ('string', 'enum'), false)
            THEN 'policyVersionMember must name a string or enum member'
        WHEN v_def ? 'normalizedCodeMember' AND NOT coalesce(v_def->'members'->v_code->>'type' IN ('string', 'enum'), false)
            THEN 'normalizedCodeMember must name a string or enum member'
        WHEN (v_def ? 'policyVersionMember') <> (v_def ? 'normalizedCodeMember')
            THEN 'policyVersionMember and normalizedCodeMember come together'
        ELSE NULL END;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'intake: observation schema definition invalid' USING ERRCODE = 'OB702', DETAIL = v_bad;
    END IF;

    INSERT INTO intake.observation_schemas (observation_type, observation_schema_version, definition_canonical, schema_sha256,
                                            discriminator, policy_version_member, normalized_code_member)
    VALUES (p_observation_type, p_observation_schema_version, v_canon, v_sha, v_disc, v_pol, v_code)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        SELECT s.schema_sha256 INTO v_old FROM intake.observation_schemas s
        WHERE s.observation_type = p_observation_type AND s.observation_schema_version = p_observation_schema_version;
        IF v_old IS DISTINCT FROM v_sha THEN
            RAISE EXCEPTION 'intake: observation schema %@% already registered with another definition', p_observation_type, p_observation_schema_version
                USING ERRCODE = 'OB702', DETAIL = 'a schema version is immutable; register a new version';
        END IF;
        RETURN v_sha;
    END IF;
    INSERT INTO intake.observation_schema_members (observation_type, observation_schema_version, member, member_type, required, nullable,
                                                   min_length, max_length, minimum, maximum, enum_values, branches)
    SELECT p_observation_type, p_observation_schema_version, e.key, e.value->>'type',
           coalesce((e.value->>'required')::boolean, false), coalesce((e.value->>'nullable')::boolean, false),
           coalesce((e.value->>'minLength')::integer, 0), coalesce((e.value->>'maxLength')::integer, 256),
           (e.value->>'minimum')::bigint, (e.value->>'maximum')::bigint,
           (SELECT pg_catalog.array_agg(x) FROM pg_catalog.jsonb_array_elements_text(e.value->'values') x),
           (SELECT pg_catalog.array_agg(x) FROM pg_catalog.jsonb_array_elements_text(e.value->'branches') x)
    FROM pg_catalog.jsonb_each(v_def->'members') e;
    RETURN v_sha;
END
$function$;

COMMENT ON FUNCTION intake.register_observation_schema(text, integer, json) IS
    'Register a closed observation body schema (type 1..128 of [A-Za-z0-9._-] from a letter; member names 1..64 characters without control characters, stored in NFC; names colliding after NFC refused); returns its jcs-sha256-v1 digest; insert-or-compare, OB702 on another definition or out of form (SPEC R-OB-1). Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION intake.register_observation_schema(text, integer, json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.register_observation_schema(text, integer, json) TO outbox_registrar;
