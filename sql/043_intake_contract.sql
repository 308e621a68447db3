-- Observation intake and projection cutover as SPEC states them (issue 37):
--  1. Names (R-OB-1): an observationType is 1..128 characters of [A-Za-z0-9._-] starting with a
--     letter (the seed's RequestAttempt, namespaced edge.request_attempt); a schema member name is
--     1..64 characters of any script without control characters, stored in NFC. A definition's
--     member names (and the discriminator / policy / code member references) are normalized to
--     NFC before the definition is canonicalized, so NFD and NFC spellings register one digest; two
--     names equal after NFC are refused (OB702). A body's member names were already matched in
--     NFC; its canonical text now orders member names by UTF-16 code units (RFC 8785) also for
--     non-ASCII names.
--  2. intake.ack_observations is fenced like ack_deliveries (R-OB-4): a token whose lease already
--     finished - a second ack of the same observation included - is rejected with OB001 (detail
--     finished), never answered acknowledged again.
--  3. Health windows are exact (R-OB-5): rejections are recorded per call at their time in
--     intake.intake_rejections (append-only) instead of being read from the quota's minute
--     buckets; any start and any positive width (at most 10000 windows). The quota (R-OB-6)
--     keeps its own accounting in intake.workload_minutes. Rejections recorded before this
--     migration keep the start of their minute as their time.
--  4. outbox.claim_rebuild_sources returns zero rows when nothing is left to hand out, before and
--     after the freeze (R-PV-2); OB803 stays for a shadow receipt or revision outside the boundary.
SET LOCAL ROLE outbox_owner;

-- 1. name grammar -------------------------------------------------------------------------------
ALTER TABLE intake.observation_schemas DROP CONSTRAINT observation_schemas_observation_type_check;
ALTER TABLE intake.observation_schemas ADD CONSTRAINT observation_schemas_observation_type_check
    CHECK (observation_type ~ '^[A-Za-z][A-Za-z0-9._-]{0,127}$');
ALTER TABLE intake.observation_schema_members DROP CONSTRAINT observation_schema_members_member_check;
ALTER TABLE intake.observation_schema_members ADD CONSTRAINT observation_schema_members_member_check
    CHECK (pg_catalog.char_length(member) BETWEEN 1 AND 64
           AND member !~ '[\u0001-\u001f\u007f-\u009f]'
           AND member = normalize(member, NFC));

-- register_observation_schema: the R-OB-1 grammar, member names in NFC ---------------------
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


-- 3. exact health windows: one row per call that refused something, at the call's time -----------
CREATE TABLE intake.intake_rejections (
    rejection_id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workload_principal_id text NOT NULL REFERENCES intake.workloads (workload_principal_id),
    rejected_at           timestamptz NOT NULL,
    rejected              integer NOT NULL CHECK (rejected >= 1),
    quota_rejected        integer NOT NULL CHECK (quota_rejected >= 0 AND quota_rejected <= rejected)
);
COMMENT ON TABLE intake.intake_rejections IS
    'Intake rejections (rejected and conflict outcomes) per accept call and workload at the call''s time, read by accepted_health_windows so a window holds exactly the rejections of its [start, end) (SPEC R-OB-5); append-only.';
CREATE INDEX intake_rejections_workload_at ON intake.intake_rejections (workload_principal_id, rejected_at);
REVOKE ALL ON TABLE intake.intake_rejections FROM PUBLIC;
CREATE TRIGGER tg_intake_rejections__immutable BEFORE DELETE OR UPDATE ON intake.intake_rejections
    FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_intake_rejections__no_truncate BEFORE TRUNCATE ON intake.intake_rejections
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
INSERT INTO intake.intake_rejections (workload_principal_id, rejected_at, rejected, quota_rejected)
SELECT m.workload_principal_id, m.minute, m.rejected, LEAST(m.quota_rejected, m.rejected)
  FROM intake.workload_minutes AS m
 WHERE m.rejected > 0
 ORDER BY m.minute, m.workload_principal_id;


-- accept_observations: rejections recorded at their time; body member order RFC 8785 for non-ASCII names
CREATE OR REPLACE FUNCTION intake.accept_observations(p_submissions json)
 RETURNS TABLE(outcome text, observation_id uuid, accepted_at timestamp with time zone, submission_payload_sha256 text, accepted_envelope_sha256 text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    c_uuid    constant text := '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
    c_rfc3339 constant text := '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$';
    v_w       intake.workloads;
    v_n       integer;
    v_minute  timestamptz := pg_catalog.date_trunc('minute', pg_catalog.now());
    v_used    integer;
    v_room    integer;
    v_retry   integer;
    v_source  text;
    v_at_text text;
    v_sus     integer[];
    v_bad     integer[] := '{}';
    v_ord     integer;
    r_ord     integer[];
    r_kind    text[];
    r_id      uuid[];
    r_sha     text[];
    r_state   text[];
    r_detail  text[];
BEGIN
    v_w := intake._intake_caller();
    IF p_submissions IS NULL OR pg_catalog.json_typeof(p_submissions) <> 'array' THEN
        RAISE EXCEPTION 'intake: submissions must be a JSON array' USING ERRCODE = '22023';
    END IF;
    v_n := pg_catalog.json_array_length(p_submissions);
    IF v_n > 1000 THEN
        RAISE EXCEPTION 'intake: at most 1000 submissions per call' USING ERRCODE = '22023',
              DETAIL = pg_catalog.format('%s items', v_n);
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;

    -- 2. the quota row of this minute, locked until commit (R-OB-6)
    INSERT INTO intake.workload_minutes AS m (workload_principal_id, minute)
    VALUES (v_w.workload_principal_id, v_minute)
    ON CONFLICT (workload_principal_id, minute) DO UPDATE SET accepted = m.accepted
    RETURNING m.accepted INTO v_used;
    v_room := GREATEST(0, v_w.max_per_minute - v_used);
    v_retry := GREATEST(1, pg_catalog.ceil(EXTRACT(epoch FROM (v_minute + interval '1 minute' - pg_catalog.clock_timestamp())))::integer);
    v_source := outbox.jcs_canonicalize(pg_catalog.json_strip_nulls(pg_catalog.json_build_object(
        'workloadPrincipalId', v_w.workload_principal_id, 'service', v_w.service,
        'environment', v_w.environment, 'deploymentId', v_w.deployment_id)));
    v_at_text := pg_catalog.to_char(pg_catalog.now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');

    -- 3. strict UTF-8: only items holding a \u0000 or surrogate escape are de-escaped one by one
    SELECT pg_catalog.array_agg(x.ord::integer) INTO v_sus
    FROM pg_catalog.json_array_elements(p_submissions) WITH ORDINALITY AS x(e, ord)
    WHERE pg_catalog.strpos(x.e::text, '\u') > 0 AND x.e::text ~ '\\u(0000|[dD][89a-fA-F])';
    FOREACH v_ord IN ARRAY coalesce(v_sus, '{}'::integer[]) LOOP
        BEGIN
            PERFORM (p_submissions -> (v_ord - 1))::jsonb;
        EXCEPTION WHEN untranslatable_character OR invalid_text_representation OR character_not_in_repertoire THEN
            v_bad := v_bad || v_ord;
        END;
    END LOOP;

    -- 4. judge every item, build the canonical texts, insert the new ids within the quota
    WITH src AS MATERIALIZED (
        SELECT x.ord::integer AS ord, x.e
        FROM pg_catalog.json_array_elements(p_submissions) WITH ORDINALITY AS x(e, ord)
    ), obj AS MATERIALIZED (
        SELECT s.ord, s.e FROM src s
        WHERE pg_catalog.json_typeof(s.e) = 'object' AND NOT (s.ord = ANY (v_bad))
    ), f0 AS MATERIALIZED (
        SELECT o.ord, o.e, coalesce(tk.n <> tk.nd, false) AS dup_top, tk.unknown,
               o.e -> 'observationId' AS j_id, o.e -> 'observationType' AS j_type,
               o.e -> 'observationSchemaVersion' AS j_ver, o.e -> 'sourceClaimedObservedAt' AS j_claimed,
               o.e -> 'body' AS body
        FROM obj o
        CROSS JOIN LATERAL (SELECT pg_catalog.count(*) AS n, pg_catalog.count(DISTINCT k.k COLLATE "C") AS nd,
                                   pg_catalog.min(k.k COLLATE "C") FILTER (WHERE k.k NOT IN ('observationId', 'observationType',
                                       'observationSchemaVersion', 'sourceClaimedObservedAt', 'body')) AS unknown
                              FROM pg_catalog.json_object_keys(o.e) AS k(k)) AS tk
    ), f1 AS MATERIALIZED (
        SELECT f0.*,
               coalesce(pg_catalog.json_typeof(f0.j_id) = 'string' AND (f0.j_id #>> '{}') ~ c_uuid, false) AS id_ok,
               coalesce(pg_catalog.json_typeof(f0.j_type) = 'string', false) AS type_ok,
               coalesce(pg_catalog.json_typeof(f0.j_ver) = 'number' AND f0.j_ver::text ~ '^[1-9][0-9]{0,6}$', false) AS ver_ok,
               (f0.j_claimed IS NULL OR coalesce(pg_catalog.json_typeof(f0.j_claimed) = 'string' AND (f0.j_claimed #>> '{}') ~ c_rfc3339, false)) AS claimed_ok,
               coalesce(pg_catalog.json_typeof(f0.body) = 'object', false) AS body_ok
        FROM f0
    ), f2 AS MATERIALIZED (
        SELECT f1.*,
               CASE WHEN f1.type_ok THEN f1.j_type #>> '{}' END AS type_text,
               CASE WHEN f1.ver_ok THEN f1.j_ver::text::integer END AS ver_int
        FROM f1
    ), f AS MATERIALIZED (
        SELECT f1.ord, f1.e, f1.dup_top, f1.unknown, f1.id_ok, f1.type_ok, f1.ver_ok, f1.claimed_ok, f1.body_ok,
               CASE WHEN f1.id_ok THEN (f1.j_id #>> '{}')::uuid END AS id,
               f1.type_text AS otype,
               f1.ver_int AS over,
               f1.j_claimed #>> '{}' AS claimed,
               CASE WHEN f1.body_ok THEN f1.body END AS body,
               CASE WHEN f1.body_ok THEN pg_catalog.octet_length(f1.body::text) END AS body_bytes,
               s.observation_type IS NOT NULL AS schema_ok,
               s.policy_version_member, s.normalized_code_member,
               CASE WHEN f1.body_ok AND s.discriminator IS NOT NULL THEN normalize(f1.body ->> s.discriminator, NFC) END AS disc,
               (NOT f1.dup_top AND f1.unknown IS NULL AND f1.id_ok AND f1.type_ok AND f1.ver_ok AND f1.claimed_ok AND f1.body_ok
                AND s.observation_type IS NOT NULL) AS shape_ok
        FROM f2 AS f1
        LEFT JOIN intake.observation_schemas s
          ON s.observation_type = f1.type_text AND s.observation_schema_version = f1.ver_int
    ), bm AS MATERIALIZED (
        SELECT f.ord, b.key AS raw_key, normalize(b.key, NFC) AS nkey, b.value AS v,
               pg_catalog.json_typeof(b.value) AS jt,
               CASE WHEN pg_catalog.json_typeof(b.value) = 'string' THEN normalize(b.value #>> '{}', NFC) END AS nv,
               f.disc, f.policy_version_member, f.normalized_code_member,
               d.member IS NOT NULL AS known, d.member_type, d.nullable, d.min_length, d.max_length,
               d.minimum, d.maximum, d.enum_values, d.branches
        FROM f
        CROSS JOIN LATERAL pg_catalog.json_each(f.body) AS b
        LEFT JOIN intake.observation_schema_members d
          ON d.observation_type = f.otype AND d.observation_schema_version = f.over
         AND d.member = normalize(b.key, NFC)
        WHERE f.shape_ok
    ), bp AS (
        SELECT bm.ord, bm.raw_key, bm.nkey, bm.nv, bm.policy_version_member, bm.normalized_code_member,
               CASE WHEN bm.jt = 'string' THEN pg_catalog.to_json(bm.nv)::text ELSE bm.v::text END AS canon,
               CASE
                   WHEN NOT bm.known THEN pg_catalog.format('unknown body member %s', pg_catalog.left(bm.nkey, 64))
                   WHEN bm.jt = 'null' THEN CASE WHEN bm.nullable THEN NULL
                                                 ELSE pg_catalog.format('body member %s may not be null', bm.nkey) END
                   WHEN bm.branches IS NOT NULL AND NOT coalesce(bm.disc = ANY (bm.branches), false)
                       THEN pg_catalog.format('body member %s is not allowed in this branch', bm.nkey)
                   WHEN bm.member_type IN ('string', 'enum', 'uuid', 'timestamp') AND bm.jt <> 'string'
                       THEN pg_catalog.format('body member %s must be a string', bm.nkey)
                   WHEN bm.member_type IN ('string', 'enum') AND pg_catalog.char_length(bm.nv) NOT BETWEEN bm.min_length AND bm.max_length
                       THEN pg_catalog.format('body member %s: length outside %s..%s', bm.nkey, bm.min_length, bm.max_length)
                   WHEN bm.member_type = 'enum' AND NOT (bm.nv = ANY (bm.enum_values))
                       THEN pg_catalog.format('body member %s: not a value of its enum', bm.nkey)
                   WHEN bm.member_type = 'uuid' AND bm.nv !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                       THEN pg_catalog.format('body member %s must be a lower-case UUID', bm.nkey)
                   WHEN bm.member_type = 'timestamp' AND bm.nv !~ c_rfc3339
                       THEN pg_catalog.format('body member %s must be an RFC 3339 timestamp', bm.nkey)
                   WHEN bm.member_type = 'boolean' AND bm.jt <> 'boolean'
                       THEN pg_catalog.format('body member %s must be a boolean', bm.nkey)
                   WHEN bm.member_type = 'integer' AND (bm.jt <> 'number' OR bm.v::text !~ '^(0|-?[1-9][0-9]{0,15})$')
                       THEN pg_catalog.format('body member %s must be an integer in its shortest form', bm.nkey)
                   WHEN bm.member_type = 'integer' AND (pg_catalog.abs(bm.v::text::bigint) > 9007199254740991
                                                        OR bm.v::text::bigint < coalesce(bm.minimum, -9007199254740991)
                                                        OR bm.v::text::bigint > coalesce(bm.maximum, 9007199254740991))
                       THEN pg_catalog.format('body member %s: integer out of bounds', bm.nkey)
                   ELSE NULL
               END AS problem
        FROM bm
    ), ba AS (
        SELECT bp.ord, pg_catalog.count(*) AS n,
               pg_catalog.count(DISTINCT bp.raw_key COLLATE "C") AS nd_raw,
               pg_catalog.count(DISTINCT bp.nkey COLLATE "C") AS nd_nfc,
               (pg_catalog.array_agg(bp.problem ORDER BY bp.nkey COLLATE "C") FILTER (WHERE bp.problem IS NOT NULL))[1] AS problem,
               '{' || pg_catalog.string_agg(pg_catalog.to_json(bp.nkey)::text || ':' || bp.canon, ','
                   ORDER BY CASE WHEN bp.nkey ~ '[^\u0001-\u007f]' THEN outbox._jcs_sort_key(bp.nkey)
                                 ELSE pg_catalog.convert_to(bp.nkey, 'UTF8') END) || '}' AS body_canon,
               pg_catalog.max(bp.nv) FILTER (WHERE bp.nkey = bp.policy_version_member) AS policy_version,
               pg_catalog.max(bp.nv) FILTER (WHERE bp.nkey = bp.normalized_code_member) AS normalized_code
        FROM bp GROUP BY bp.ord
    ), rq AS (
        SELECT f.ord, pg_catalog.min(d.member COLLATE "C") AS missing
        FROM f
        JOIN intake.observation_schema_members d
          ON d.observation_type = f.otype AND d.observation_schema_version = f.over AND d.required
        WHERE f.shape_ok AND (d.branches IS NULL OR coalesce(f.disc = ANY (d.branches), false))
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.json_object_keys(f.body) AS bk(k) WHERE normalize(bk.k, NFC) = d.member)
        GROUP BY f.ord
    ), j AS (
        SELECT s.ord, f.id, f.otype, f.over, f.claimed, coalesce(ba.body_canon, '{}') AS body_canon,
               CASE
                   WHEN f.ord IS NULL AND s.ord = ANY (v_bad)
                       THEN ARRAY['OB201', 'submission is not strict UTF-8: a \u0000 or an unpaired surrogate escape']
                   WHEN f.ord IS NULL THEN ARRAY['OB702', 'submission is not a JSON object']
                   WHEN f.dup_top THEN ARRAY['OB201', 'duplicate member name in the submission']
                   WHEN f.unknown IS NOT NULL THEN ARRAY['OB702', pg_catalog.format('unknown submission member %s', pg_catalog.left(f.unknown, 64))]
                   WHEN NOT f.id_ok THEN ARRAY['OB702', 'observationId must be a UUID string']
                   WHEN NOT f.type_ok THEN ARRAY['OB702', 'observationType must be a string']
                   WHEN NOT f.ver_ok THEN ARRAY['OB702', 'observationSchemaVersion must be a positive integer']
                   WHEN NOT f.claimed_ok THEN ARRAY['OB702', 'sourceClaimedObservedAt must be an RFC 3339 timestamp string when present']
                   WHEN NOT f.body_ok THEN ARRAY['OB702', 'body must be a JSON object']
                   WHEN f.body_bytes > v_w.max_body_bytes
                       THEN ARRAY['OB703', pg_catalog.format('body of %s bytes exceeds max_body_bytes %s (not retryable as is)', f.body_bytes, v_w.max_body_bytes)]
                   WHEN NOT f.schema_ok THEN ARRAY['OB702', 'observationType/observationSchemaVersion not registered']
                   WHEN coalesce(ba.n, 0) <> coalesce(ba.nd_raw, 0) THEN ARRAY['OB201', 'duplicate member name in the body']
                   WHEN coalesce(ba.nd_raw, 0) <> coalesce(ba.nd_nfc, 0) THEN ARRAY['OB201', 'two body member names are equal after NFC normalization']
                   WHEN ba.problem IS NOT NULL THEN ARRAY['OB702', ba.problem]
                   WHEN rq.missing IS NOT NULL THEN ARRAY['OB702', pg_catalog.format('required body member %s missing', rq.missing)]
                   WHEN f.policy_version_member IS NOT NULL AND (ba.policy_version IS NOT NULL OR ba.normalized_code IS NOT NULL)
                        AND NOT EXISTS (SELECT 1 FROM intake.normalization_policies np
                                        WHERE np.workload_principal_id = v_w.workload_principal_id
                                          AND np.policy_version = ba.policy_version
                                          AND ba.normalized_code = ANY (np.normalized_codes))
                       THEN ARRAY['OB702', 'normalization policy version and normalized code are not registered for this workload']
                   ELSE NULL
               END AS problem
        FROM src s
        LEFT JOIN f ON f.ord = s.ord
        LEFT JOIN ba ON ba.ord = s.ord
        LEFT JOIN rq ON rq.ord = s.ord
    ), ok AS MATERIALIZED (
        SELECT j.ord, j.id, j.otype, j.over, j.claimed, j.body_canon, t.sub_canon,
               pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(t.sub_canon, 'UTF8')), 'hex') AS sub_sha
        FROM j
        CROSS JOIN LATERAL (SELECT '{"body":' || j.body_canon || ',"observationId":"' || j.id::text
                                   || '","observationSchemaVersion":' || j.over::text
                                   || ',"observationType":' || pg_catalog.to_json(j.otype)::text
                                   || coalesce(',"sourceClaimedObservedAt":' || pg_catalog.to_json(j.claimed)::text, '')
                                   || '}' AS sub_canon) t
        WHERE j.problem IS NULL
    ), cand AS MATERIALIZED (
        SELECT fi.*, pg_catalog.row_number() OVER (ORDER BY fi.ord) AS rank, e.env_canon,
               pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(e.env_canon, 'UTF8')), 'hex') AS env_sha
        FROM (SELECT DISTINCT ON (ok.id) ok.* FROM ok ORDER BY ok.id, ok.ord) fi
        CROSS JOIN LATERAL (SELECT '{"acceptedAt":"' || v_at_text || '","body":' || fi.body_canon
                                   || ',"observationDigestAlgorithmVersion":"jcs-sha256-v1","observationId":"' || fi.id::text
                                   || '","observationSchemaVersion":' || fi.over::text
                                   || ',"observationType":' || pg_catalog.to_json(fi.otype)::text
                                   || ',"source":' || v_source
                                   || coalesce(',"sourceClaimedObservedAt":' || pg_catalog.to_json(fi.claimed)::text, '')
                                   || ',"submissionPayloadSha256":"' || fi.sub_sha || '"}' AS env_canon) e
        WHERE NOT EXISTS (SELECT 1 FROM intake.observation_ids r WHERE r.observation_id = fi.id)
    ), ins AS (
        INSERT INTO intake.observation_ids AS r (observation_id, workload_principal_id, digest_algorithm_version,
                                                 submission_payload_sha256, accepted_envelope_sha256, accepted_at)
        SELECT c.id, v_w.workload_principal_id, 'jcs-sha256-v1', c.sub_sha, c.env_sha, pg_catalog.now()
        FROM cand c WHERE c.rank <= v_room
        ORDER BY c.id
        ON CONFLICT (observation_id) DO NOTHING
        RETURNING r.observation_id
    ), ins_obs AS (
        INSERT INTO intake.observations AS o (observation_id, accepted_at, workload_principal_id, observation_type,
                                              observation_schema_version, source_claimed_observed_at,
                                              accepted_envelope_canonical, accepted_envelope, accepted_envelope_sha256)
        SELECT c.id, pg_catalog.now(), v_w.workload_principal_id, c.otype, c.over, c.claimed, c.env_canon, c.env_canon::jsonb, c.env_sha
        FROM cand c WHERE c.id = ANY (ARRAY(SELECT i.observation_id FROM ins i))
        RETURNING o.observation_id
    ), cnt AS (
        UPDATE intake.workload_minutes m SET accepted = m.accepted + (SELECT pg_catalog.count(*) FROM ins_obs)
        WHERE m.workload_principal_id = v_w.workload_principal_id AND m.minute = v_minute
    )
    SELECT pg_catalog.array_agg(j.ord ORDER BY j.ord),
           pg_catalog.array_agg(CASE WHEN j.problem IS NOT NULL THEN 'rejected'
                                     WHEN c.rank > v_room THEN 'rejected'
                                     WHEN c.id = ANY (i.ids) THEN 'new'
                                     ELSE 'compare' END ORDER BY j.ord),
           pg_catalog.array_agg(j.id ORDER BY j.ord),
           pg_catalog.array_agg(ok.sub_sha ORDER BY j.ord),
           pg_catalog.array_agg(CASE WHEN j.problem IS NOT NULL THEN j.problem[1]
                                     WHEN c.rank > v_room THEN 'OB703' END ORDER BY j.ord),
           pg_catalog.array_agg(CASE WHEN j.problem IS NOT NULL THEN j.problem[2]
                                     WHEN c.rank > v_room
                                         THEN pg_catalog.format('quota of %s accepted observations per minute exceeded; retryAfterSeconds=%s', v_w.max_per_minute, v_retry) END
                                ORDER BY j.ord)
      INTO r_ord, r_kind, r_id, r_sha, r_state, r_detail
    FROM j
    LEFT JOIN ok ON ok.ord = j.ord
    LEFT JOIN cand c ON c.ord = j.ord
    CROSS JOIN (SELECT pg_catalog.array_agg(io.observation_id) AS ids FROM ins_obs io) AS i;

    -- 5. compare with the registry (fresh snapshot), audit conflicts, count rejections, answer
    RETURN QUERY
    WITH a AS (
        SELECT x.ord, x.kind, x.id, x.sha, x.state, x.detail
        FROM unnest(r_ord, r_kind, r_id, r_sha, r_state, r_detail) AS x(ord, kind, id, sha, state, detail)
    ), res AS MATERIALIZED (
        SELECT a.ord, a.id, a.sha, r.workload_principal_id AS first_w, r.accepted_at AS r_at,
               r.submission_payload_sha256 AS r_sha, r.accepted_envelope_sha256 AS r_env,
               CASE
                   WHEN a.kind = 'rejected' THEN 'rejected'
                   WHEN a.kind = 'new' THEN 'accepted_new'
                   WHEN r.observation_id IS NULL THEN 'rejected'  -- a later copy of an item refused by the quota
                   WHEN r.workload_principal_id = v_w.workload_principal_id AND r.digest_algorithm_version = 'jcs-sha256-v1'
                        AND r.submission_payload_sha256 = a.sha
                       THEN CASE WHEN EXISTS (SELECT 1 FROM intake.observation_purge_markers pm WHERE pm.observation_id = a.id)
                                 THEN 'accepted_existing_purged' ELSE 'accepted_existing' END
                   ELSE 'conflict'
               END AS outcome,
               CASE
                   WHEN r.workload_principal_id IS DISTINCT FROM v_w.workload_principal_id THEN 'other_source'
                   WHEN r.digest_algorithm_version <> 'jcs-sha256-v1' THEN 'other_algorithm'
                   ELSE 'other_digest'
               END AS conflict_reason,
               CASE WHEN a.kind = 'compare' AND r.observation_id IS NULL THEN 'OB703' ELSE a.state END AS state,
               CASE WHEN a.kind = 'compare' AND r.observation_id IS NULL
                    THEN pg_catalog.format('quota of %s accepted observations per minute exceeded; retryAfterSeconds=%s', v_w.max_per_minute, v_retry)
                    ELSE a.detail END AS detail
        FROM a
        LEFT JOIN intake.observation_ids r ON a.kind IN ('new', 'compare') AND r.observation_id = a.id
    ), aud AS (
        INSERT INTO intake.observation_conflicts (observation_id, first_workload_id, second_workload_id, reason)
        SELECT res.id, res.first_w, v_w.workload_principal_id, res.conflict_reason
        FROM res WHERE res.outcome = 'conflict'
    ), counters AS (
        UPDATE intake.workload_minutes m
        SET rejected = m.rejected + (SELECT pg_catalog.count(*) FROM res WHERE res.outcome IN ('rejected', 'conflict')),
            quota_rejected = m.quota_rejected + (SELECT pg_catalog.count(*) FROM res WHERE res.state = 'OB703')
        WHERE m.workload_principal_id = v_w.workload_principal_id AND m.minute = v_minute
          AND EXISTS (SELECT 1 FROM res WHERE res.outcome IN ('rejected', 'conflict'))
    ), rejections AS (
        INSERT INTO intake.intake_rejections (workload_principal_id, rejected_at, rejected, quota_rejected)
        SELECT v_w.workload_principal_id, pg_catalog.now(), pg_catalog.count(*)::integer,
               (pg_catalog.count(*) FILTER (WHERE res.state = 'OB703'))::integer
          FROM res WHERE res.outcome IN ('rejected', 'conflict')
        HAVING pg_catalog.count(*) > 0
    )
    SELECT res.outcome,
           res.id,
           CASE WHEN res.outcome IN ('accepted_new', 'accepted_existing', 'accepted_existing_purged') THEN res.r_at END,
           CASE WHEN res.outcome IN ('accepted_new', 'accepted_existing') THEN res.r_sha
                WHEN res.outcome = 'conflict' THEN res.sha END,
           CASE WHEN res.outcome IN ('accepted_new', 'accepted_existing') THEN res.r_env END,
           CASE WHEN res.outcome = 'conflict' THEN 'OB701' ELSE res.state END,
           CASE WHEN res.outcome = 'conflict'
                    THEN 'observation id already accepted with other content or from another source (integrity conflict recorded)'
                WHEN res.outcome = 'accepted_existing_purged' THEN 'payload purged; observationDigestAlgorithmVersion=jcs-sha256-v1'
                ELSE res.detail END
    FROM res
    ORDER BY res.ord;
END
$function$;

COMMENT ON FUNCTION intake.accept_observations(json) IS
    'Accept a batch of observation submissions from the calling workload: one row per item in input order (accepted_new | accepted_existing | accepted_existing_purged | conflict | rejected); OB704 when the role is not a workload (SPEC R-OB-1, R-OB-2, R-OB-6).';


-- accepted_health_windows: exact windows for any start and positive width
CREATE OR REPLACE FUNCTION intake.accepted_health_windows(p_from_time timestamp with time zone, p_to_time timestamp with time zone, p_width interval)
 RETURNS TABLE(workload_principal_id text, window_start timestamp with time zone, window_end timestamp with time zone, accepted integer, last_accepted_at timestamp with time zone, send_failures integer, intake_rejections integer, health text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    IF p_from_time IS NULL OR p_to_time IS NULL OR p_to_time <= p_from_time OR p_width IS NULL OR p_width <= interval '0' THEN
        RAISE EXCEPTION 'intake: health window arguments out of bounds'
            USING ERRCODE = '22023', DETAIL = 'from_time < to_time, a positive width';
    END IF;
    IF EXTRACT(epoch FROM (p_to_time - p_from_time)) / EXTRACT(epoch FROM p_width) > 10000 THEN
        RAISE EXCEPTION 'intake: more than 10000 health windows' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH win AS (
        SELECT g AS ws, LEAST(g + p_width, p_to_time) AS we
        FROM pg_catalog.generate_series(p_from_time, p_to_time - interval '1 microsecond', p_width) AS g
    ), cells AS (
        SELECT w.workload_principal_id AS wp, win.ws, win.we
        FROM intake.workloads w CROSS JOIN win
    )
    SELECT c.wp, c.ws, c.we,
           a.n::integer, a.last_at,
           coalesce(sf.n, 0)::integer, coalesce(rj.n, 0)::integer,
           CASE WHEN a.n = 0 AND coalesce(sf.n, 0) = 0 AND coalesce(rj.n, 0) = 0 THEN 'unknown'
                WHEN coalesce(sf.n, 0) > 0 OR coalesce(rj.n, 0) > 0 THEN 'degraded'
                ELSE 'healthy' END
    FROM cells c
    CROSS JOIN LATERAL (SELECT pg_catalog.count(*) AS n, pg_catalog.max(r.accepted_at) AS last_at
                        FROM intake.observation_ids r
                        WHERE r.workload_principal_id = c.wp AND r.accepted_at >= c.ws AND r.accepted_at < c.we) a
    LEFT JOIN LATERAL (SELECT pg_catalog.sum(s.failed) AS n FROM intake.send_failures s
                       WHERE s.workload_principal_id = c.wp AND s.window_start >= c.ws AND s.window_start < c.we) sf ON true
    LEFT JOIN LATERAL (SELECT pg_catalog.sum(x.rejected) AS n FROM intake.intake_rejections x
                       WHERE x.workload_principal_id = c.wp AND x.rejected_at >= c.ws AND x.rejected_at < c.we) rj ON true
    ORDER BY c.wp, c.ws;
END
$function$;

COMMENT ON FUNCTION intake.accepted_health_windows(timestamptz, timestamptz, interval) IS
    'Per workload and window [start, end): accepted count, last acceptedAt, known send failures (by their report window start), intake rejections (at their time) and healthy | degraded | unknown; exact for any start and positive width, at most 10000 windows; no coverage percentage (SPEC R-OB-5). Caller: outbox_auditor.';


-- 2. ack_observations: a finished lease's token (a second ack included) is OB001 finished
CREATE OR REPLACE FUNCTION intake.ack_observations(p_items json)
 RETURNS TABLE(observation_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    c_uuid constant text := '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
    v_now  timestamptz := pg_catalog.clock_timestamp();
    v_n    integer;
BEGIN
    IF p_items IS NULL OR pg_catalog.json_typeof(p_items) <> 'array' THEN
        RAISE EXCEPTION 'ack_observations: items must be a JSON array' USING ERRCODE = '22023';
    END IF;
    v_n := pg_catalog.json_array_length(p_items);
    IF v_n > 1000 THEN
        RAISE EXCEPTION 'ack_observations: at most 1000 items per call' USING ERRCODE = '22023',
              DETAIL = pg_catalog.format('%s items', v_n);
    END IF;
    RETURN QUERY
    WITH raw AS MATERIALIZED (
        SELECT x.ord, x.e, pg_catalog.json_typeof(x.e) = 'object' AS is_obj
          FROM pg_catalog.json_array_elements(p_items) WITH ORDINALITY AS x(e, ord)
    ), f AS (
        SELECT r.ord,
               CASE WHEN r.is_obj THEN r.e ->> 'consumerName' END AS cn,
               CASE WHEN r.is_obj THEN r.e ->> 'observationId' END AS oid_t,
               CASE WHEN r.is_obj THEN r.e ->> 'leaseToken' END AS tok_t,
               CASE WHEN r.is_obj THEN r.e ->> 'acceptedEnvelopeSha256' END AS sha
          FROM raw AS r
    ), p AS MATERIALIZED (
        SELECT f.ord, f.cn, f.sha,
               (f.cn IS NOT NULL AND coalesce(f.oid_t ~ c_uuid, false) AND coalesce(f.tok_t ~ c_uuid, false)
                AND coalesce(f.sha ~ '^[0-9a-f]{64}$', false)) AS well_formed,
               CASE WHEN f.oid_t ~ c_uuid THEN f.oid_t::uuid END AS oid,
               CASE WHEN f.tok_t ~ c_uuid THEN f.tok_t::uuid END AS tok
          FROM f
    ), j AS MATERIALIZED (
        SELECT p.ord, p.oid,
               CASE
                 WHEN NOT p.well_formed THEN '22023'
                 WHEN d.status IS DISTINCT FROM 'leased' OR d.lease_token <> p.tok OR d.lease_expires_at <= v_now THEN 'OB001'
                 WHEN i.accepted_envelope_sha256 <> p.sha THEN 'OB002'
                 WHEN EXISTS (SELECT 1 FROM intake.observation_projectors AS pr
                               WHERE pr.consumer_name = p.cn
                                 AND NOT EXISTS (SELECT 1 FROM inbox.observation_receipts AS rc
                                                  WHERE rc.consumer_name = pr.consumer_name
                                                    AND rc.projection_name = pr.projection_name
                                                    AND rc.projection_version = pr.projection_version
                                                    AND rc.observation_id = p.oid
                                                    AND rc.accepted_envelope_sha256 = p.sha)) THEN 'OB002'
                 ELSE NULL
               END AS state,
               CASE
                 WHEN NOT p.well_formed THEN 'item must be {consumerName, observationId, leaseToken, acceptedEnvelopeSha256} with UUIDs and a 64-hex digest'
                 WHEN d.status IS NULL THEN 'no_work_row'
                 WHEN d.status = 'acknowledged' THEN 'finished'
                 WHEN d.status = 'pending' THEN 'not_leased'
                 WHEN d.lease_token <> p.tok THEN 'stale_token'
                 WHEN d.lease_expires_at <= v_now THEN 'lease_expired'
                 WHEN i.accepted_envelope_sha256 <> p.sha THEN 'digest_mismatch'
                 ELSE 'receipt_missing'
               END AS why,
               d.status = 'leased' AS leased, p.cn, p.tok
          FROM p
          LEFT JOIN intake.observation_deliveries AS d ON p.well_formed AND d.consumer_name = p.cn AND d.observation_id = p.oid
          LEFT JOIN intake.observation_ids AS i ON p.well_formed AND i.observation_id = p.oid
    ), u AS (
        UPDATE intake.observation_deliveries AS d
           SET status = 'acknowledged', acknowledged_at = v_now
          FROM (SELECT DISTINCT j.cn, j.oid, j.tok FROM j WHERE j.state IS NULL AND j.leased) AS k
         WHERE d.consumer_name = k.cn AND d.observation_id = k.oid
           AND d.status = 'leased' AND d.lease_token = k.tok   -- re-checked on the row's latest version
        RETURNING d.consumer_name, d.observation_id
    ), r0 AS (
        SELECT j.*, pg_catalog.row_number() OVER (PARTITION BY j.cn, j.oid, (j.state IS NULL AND j.leased) ORDER BY j.ord) AS nth
          FROM j
    ), r AS (
        SELECT j.ord, j.oid,
               CASE WHEN j.state IS NULL AND j.leased AND j.nth > 1 THEN 'OB001'
                    WHEN j.state IS NULL AND j.leased AND NOT EXISTS (SELECT 1 FROM u WHERE u.consumer_name = j.cn AND u.observation_id = j.oid)
                    THEN 'OB001' ELSE j.state END AS state,
               CASE WHEN j.state IS NULL AND j.leased AND j.nth > 1 THEN 'finished'  -- the same observation twice in one call
                    WHEN j.state IS NULL AND j.leased AND NOT EXISTS (SELECT 1 FROM u WHERE u.consumer_name = j.cn AND u.observation_id = j.oid)
                    THEN 'lease_lost' ELSE j.why END AS why
          FROM r0 AS j
    )
    SELECT r.oid,
           CASE WHEN r.state IS NULL THEN 'acknowledged' ELSE 'rejected' END,
           r.state,
           CASE WHEN r.state IS NULL THEN NULL ELSE r.why END
      FROM r
     ORDER BY r.ord;
END
$function$;

COMMENT ON FUNCTION intake.ack_observations(json) IS
    'Acknowledge leased observations, fenced like ack_deliveries: lease token (a finished, expired or replaced lease - a second ack included - is OB001), accepted envelope digest and the consumer''s receipt for every registered projection (OB002); one row per item, in input order (SPEC R-OB-4). Caller: outbox_observation_projector.';


-- 4. claim_rebuild_sources: zero rows at the end, before and after the freeze
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


RESET ROLE;
