-- intake.accept_observations(submissions json)
--   RETURNS TABLE (outcome text, observation_id uuid, accepted_at timestamptz,
--                  submission_payload_sha256 text, accepted_envelope_sha256 text, sqlstate text, detail text)
--   (public, SPEC R-OB-1, R-OB-2, R-OB-3, R-OB-5, R-OB-6, §13; HP-1, HP-2)
-- Purpose: accept a JSON array of Submission@1 documents from the calling role's workload and
--   answer one row per item in input order: accepted_new, accepted_existing,
--   accepted_existing_purged, conflict (OB701) or rejected (OB201, OB702, OB703). An invalid item
--   never stops the others; nothing is raised for an item.
-- Locking: the workload's quota row of this minute; the id registry's unique index. READ COMMITTED.
-- SQLSTATEs (whole call): OB704 the calling role is not a registered workload; 22023 the argument
--   is not a JSON array or has more than 1000 items.
-- Design notes (canonicalization, the five statements, cost): docs/intake.md#intakeaccept_observations
-- Caller: outbox_intake (a login role registered as a workload and granted outbox_intake).
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
    ON CONFLICT (workload_principal_id, minute) DO UPDATE SET accepted = m.accepted;
    SELECT m.accepted INTO v_used FROM intake.workload_minutes AS m
     WHERE m.workload_principal_id = v_w.workload_principal_id AND m.minute = v_minute;
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
    FROM j
    LEFT JOIN ok ON ok.ord = j.ord
    LEFT JOIN cand c ON c.ord = j.ord
    CROSS JOIN (SELECT pg_catalog.array_agg(io.observation_id) AS ids FROM ins_obs io) AS i
      INTO r_ord, r_kind, r_id, r_sha, r_state, r_detail;

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

REVOKE ALL ON FUNCTION intake.accept_observations(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.accept_observations(json) TO outbox_intake;
