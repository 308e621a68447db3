-- Hardening, third round: the intake and projection-version tables guarded like the outbox's
-- (issue 38; SPEC R-SEC-3, R-SEC-5, R-OB-4, R-OB-7, R-PV-2, R-PV-3). Builds on 043.
--  1. outbox.tg_kernel_dml__guarded(): a statement-level guard that reads the call stack (GET
--     DIAGNOSTICS PG_CONTEXT), never a session setting. The statement that fired it must be one of
--     the statements of a function named in the trigger's arguments - the statement text must be a
--     whole statement of that function's source (prosrc), run from that function's frame - or the
--     write is OB202, for every role, the owner included. Every write of the intake tables and of the
--     projection-version tables (accepted envelopes and ids, purge markers and runs, quota rows,
--     rejections, conflicts, observation work rows, registries, receipts of observations, versions,
--     builds, boundaries, readiness proofs, version history, the build ledger) is pinned to the
--     functions that own it. Append-only tables stay append-only (their UPDATE/DELETE triggers);
--     intake.workload_minutes gets its missing DELETE/TRUNCATE guards.
--  2. The purge's delete guard no longer trusts the pgintake.purge_run setting: a delete of an
--     accepted observation needs the purge function's frame and a purge marker of the row;
--     intake.verify_purge_run re-derives what it certifies from the immutable facts (markers, the
--     id registry, the projectors and their receipts, the legal holds at purge time, the run's
--     cutoff and times).
--  3. intake.register_workload refuses the kernel group roles, built-in (pg_*), superuser and already-bound roles
--     (a consumer role of inbox.consumer_roles, another workload's role), like bind_consumer_role.
--  4. intake.claim_observations and intake.ack_observations act only for a consumer bound to the
--     calling role (inbox._inbox_check_caller, 42501), like the inbox functions (R-SEC-5).
--  5. Legal holds cover observations: outbox.set_legal_hold accepts an accepted observation id (the
--     hold row names it in event_id); the purge already skips held ids.
SET LOCAL ROLE outbox_owner;

CREATE FUNCTION outbox.tg_kernel_dml__guarded() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_context text;
    v_nl      integer;
    v_rest    text;
    v_end     integer;
    v_stmt    text;
    v_frame   text[];
    v_src     text;
    v_pos     integer;
BEGIN
    -- line 1 of the call stack is this trigger; next must come the statement that fired it and
    -- the frame of the function that ran it - frames PostgreSQL writes. The statement text must
    -- be a whole statement of that function's own source (so a statement typed elsewhere cannot
    -- carry a forged frame inside a literal: it would have to be that function's statement).
    GET DIAGNOSTICS v_context = PG_CONTEXT;
    v_nl := pg_catalog.strpos(v_context, E'\n');
    IF v_nl > 0 THEN
        v_rest := pg_catalog.substr(v_context, v_nl + 1);
        IF pg_catalog.left(v_rest, 15) = 'SQL statement "' THEN
            v_end := pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ');
            IF v_end > 16 THEN
                v_stmt := pg_catalog.substr(v_rest, 16, v_end - 16);
                v_frame := pg_catalog.regexp_match(pg_catalog.split_part(pg_catalog.substr(v_rest, v_end + 2), E'\n', 1),
                               '^PL/pgSQL function ([a-z_]+\.[a-z_]+\([a-z ,\[\]]*\)) line [0-9]+ at [A-Za-z ]+$');
                IF v_frame IS NOT NULL AND v_frame[1] = ANY (TG_ARGV) THEN
                    SELECT p.prosrc INTO v_src FROM pg_catalog.pg_proc AS p WHERE p.oid = pg_catalog.to_regprocedure(v_frame[1]);
                    v_pos := pg_catalog.strpos(v_src, v_stmt);
                    IF v_pos > 0 AND pg_catalog.substr(v_src, v_pos + pg_catalog.length(v_stmt), 64) ~ '^\s*(;|INTO\s)' THEN
                        RETURN NULL;
                    END IF;
                END IF;
            END IF;
        END IF;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on %.% outside its kernel functions', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('only %s may %s these rows; the guard reads the call stack, never a session setting (SPEC R-SEC-3)',
                                         pg_catalog.array_to_string(TG_ARGV, ', '), pg_catalog.lower(TG_OP));
END
$fn$;
COMMENT ON FUNCTION outbox.tg_kernel_dml__guarded() IS
    'Trigger (statement level): OB202 unless the statement that fired it is a statement of one of the functions named in the trigger arguments, run from that function (call stack, PG_CONTEXT; no session setting). SPEC R-SEC-3, issue 38.';
REVOKE ALL ON FUNCTION outbox.tg_kernel_dml__guarded() FROM PUBLIC;


-- 1. every write of the intake and projection-version tables through its functions only
CREATE TRIGGER tg_observations__insert_guarded BEFORE INSERT ON intake.observations
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE TRIGGER tg_observations__delete_guarded BEFORE DELETE ON intake.observations
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.purge_observation_payloads(interval,integer)');
CREATE TRIGGER tg_observation_ids__insert_guarded BEFORE INSERT ON intake.observation_ids
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE TRIGGER tg_observation_conflicts__insert_guarded BEFORE INSERT ON intake.observation_conflicts
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE TRIGGER tg_intake_rejections__insert_guarded BEFORE INSERT ON intake.intake_rejections
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE TRIGGER tg_workload_minutes__writers BEFORE INSERT OR UPDATE ON intake.workload_minutes
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE TRIGGER tg_observation_purge_markers__insert_guarded BEFORE INSERT ON intake.observation_purge_markers
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.purge_observation_payloads(interval,integer)');
CREATE TRIGGER tg_purge_runs__insert_guarded BEFORE INSERT ON intake.purge_runs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.purge_observation_payloads(interval,integer)');
CREATE TRIGGER tg_observation_deliveries__insert_guarded BEFORE INSERT ON intake.observation_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.tg_observations__fanout()', 'intake.tg_observation_projectors__backfill()');
CREATE TRIGGER tg_observation_deliveries__update_guarded BEFORE UPDATE ON intake.observation_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.claim_observations(text,text,integer,interval)', 'intake.ack_observations(json)');
CREATE TRIGGER tg_send_failures__insert_guarded BEFORE INSERT ON intake.send_failures
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.record_send_failures(integer,timestamp with time zone,timestamp with time zone,text)');
CREATE TRIGGER tg_workloads__insert_guarded BEFORE INSERT ON intake.workloads
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_workload(name,text,text,text,integer,integer,text)');
CREATE TRIGGER tg_normalization_policies__insert_guarded BEFORE INSERT ON intake.normalization_policies
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_normalization_policy(text,text,text[])');
CREATE TRIGGER tg_observation_schemas__insert_guarded BEFORE INSERT ON intake.observation_schemas
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_observation_schema(text,integer,json)');
CREATE TRIGGER tg_observation_schema_members__insert_guarded BEFORE INSERT ON intake.observation_schema_members
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_observation_schema(text,integer,json)');
CREATE TRIGGER tg_observation_projectors__insert_guarded BEFORE INSERT ON intake.observation_projectors
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_observation_projector(text,text,integer)');
CREATE TRIGGER tg_observation_receipts__insert_guarded BEFORE INSERT ON inbox.observation_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('inbox.record_observation_receipt(text,text,integer,uuid,text)');
CREATE TRIGGER tg_projection_versions__insert_guarded BEFORE INSERT ON outbox.projection_versions
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.register_projection_version(text,integer,text)', 'outbox.tg_delivery_set_versions__register_projections()');
CREATE TRIGGER tg_projection_versions__update_guarded BEFORE UPDATE ON outbox.projection_versions
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.start_shadow_build(text,integer)', 'outbox.freeze_cutover_candidate(uuid,uuid)', 'outbox.retire_projection_version(text,integer)', 'outbox.cutover_projection(uuid,uuid,integer,integer,text,text)');
CREATE TRIGGER tg_projection_builds__insert_guarded BEFORE INSERT ON outbox.projection_builds
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.start_shadow_build(text,integer)');
CREATE TRIGGER tg_projection_builds__update_guarded BEFORE UPDATE ON outbox.projection_builds
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.start_shadow_build(text,integer)', 'outbox.claim_rebuild_sources(uuid,uuid,integer)', 'outbox.freeze_cutover_candidate(uuid,uuid)', 'outbox.retire_projection_version(text,integer)', 'outbox.cutover_projection(uuid,uuid,integer,integer,text,text)');
CREATE TRIGGER tg_projection_build_sources__insert_guarded BEFORE INSERT ON outbox.projection_build_sources
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.claim_rebuild_sources(uuid,uuid,integer)');
CREATE TRIGGER tg_projection_version_history__insert_guarded BEFORE INSERT ON outbox.projection_version_history
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.tg_projection_versions__history()');
CREATE TRIGGER tg_cutover_boundaries__insert_guarded BEFORE INSERT ON outbox.cutover_boundaries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.freeze_cutover_candidate(uuid,uuid)');
CREATE TRIGGER tg_cutover_boundary_members__insert_guarded BEFORE INSERT ON outbox.cutover_boundary_members
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.freeze_cutover_candidate(uuid,uuid)');
CREATE TRIGGER tg_cutover_readiness_proofs__insert_guarded BEFORE INSERT ON outbox.cutover_readiness_proofs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.cutover_projection(uuid,uuid,integer,integer,text,text)');
CREATE TRIGGER tg_workload_minutes__no_delete BEFORE DELETE ON intake.workload_minutes
    FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_workload_minutes__no_truncate BEFORE TRUNCATE ON intake.workload_minutes
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();

-- accept_observations: the quota row is read after its upsert, INTO at the end of the judging statement
-- (each write statement is a whole statement of the function's source, as the guard requires)
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


-- 2. purge without the session setting (the guard reads the call stack)
CREATE OR REPLACE FUNCTION intake.purge_observation_payloads(p_older_than interval, p_max_rows integer DEFAULT 1000)
 RETURNS TABLE(run_id uuid, purged integer, skipped integer, purged_set_sha256 text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_run     uuid := pg_catalog.gen_random_uuid();
    v_started timestamptz := pg_catalog.clock_timestamp();
    v_cutoff  timestamptz;
    v_ids     uuid[];
    v_ok      boolean[];
    v_purged  integer;
    v_sha     text;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '0' THEN
        RAISE EXCEPTION 'intake: older_than must be a non-negative interval' USING ERRCODE = '22023';
    END IF;
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'intake: max_rows must be 1..100000' USING ERRCODE = '22023';
    END IF;
    v_cutoff := pg_catalog.now() - p_older_than;

    SELECT pg_catalog.array_agg(x.observation_id ORDER BY x.accepted_at, x.observation_id),
           pg_catalog.array_agg(x.eligible ORDER BY x.accepted_at, x.observation_id)
      INTO v_ids, v_ok
    FROM (SELECT o.observation_id, o.accepted_at,
                 NOT EXISTS (SELECT 1 FROM intake.observation_projectors p
                             WHERE NOT EXISTS (SELECT 1 FROM inbox.observation_receipts r
                                               WHERE r.consumer_name = p.consumer_name AND r.projection_name = p.projection_name
                                                 AND r.projection_version = p.projection_version
                                                 AND r.observation_id = o.observation_id
                                                 AND r.accepted_envelope_sha256 = o.accepted_envelope_sha256))
                 AND NOT EXISTS (SELECT 1 FROM outbox.legal_holds h
                                 WHERE h.event_id = o.observation_id AND h.released_at IS NULL) AS eligible
          FROM intake.observations o
          WHERE o.accepted_at < v_cutoff
          ORDER BY o.accepted_at, o.observation_id
          LIMIT p_max_rows
          FOR UPDATE OF o SKIP LOCKED) x;

    INSERT INTO intake.observation_purge_markers (observation_id, run_id, accepted_at, accepted_envelope_sha256, purged_at)
    SELECT o.observation_id, v_run, o.accepted_at, o.accepted_envelope_sha256, pg_catalog.now()
    FROM unnest(v_ids, v_ok) AS u(id, ok)
    JOIN intake.observations o ON o.observation_id = u.id
    WHERE u.ok;

    DELETE FROM intake.observations o
    USING intake.observation_purge_markers m
    WHERE m.run_id = v_run AND o.observation_id = m.observation_id;
    GET DIAGNOSTICS v_purged = ROW_COUNT;

    SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
               '[' || coalesce(pg_catalog.string_agg('{"acceptedEnvelopeSha256":"' || m.accepted_envelope_sha256
                                                     || '","observationId":"' || m.observation_id::text || '"}', ','
                                                     ORDER BY m.observation_id), '') || ']', 'UTF8')), 'hex')
      INTO v_sha
    FROM intake.observation_purge_markers m WHERE m.run_id = v_run;

    INSERT INTO intake.purge_runs (run_id, run_by, started_at, finished_at, older_than, max_rows, cutoff, purged, skipped, purged_set_sha256)
    VALUES (v_run, session_user, v_started, pg_catalog.clock_timestamp(), p_older_than, p_max_rows, v_cutoff,
            v_purged, coalesce(pg_catalog.cardinality(v_ids), 0) - v_purged, v_sha);

    RETURN QUERY SELECT v_run, v_purged, coalesce(pg_catalog.cardinality(v_ids), 0) - v_purged, v_sha;
END
$function$;

COMMENT ON FUNCTION intake.purge_observation_payloads(interval, integer) IS
    'Purge payloads of old accepted observations every registered projector has a receipt for (no legal hold): markers, then deletes, then the run row with purged_set_sha256 (SPEC R-OB-7).';

CREATE OR REPLACE FUNCTION intake.tg_observations__purge_delete() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- the statement-level guard (tg_observations__delete_guarded) admits only the purge
    -- function's delete; each row must also have its purge marker (written first, same run)
    IF EXISTS (SELECT 1 FROM intake.observation_purge_markers AS m WHERE m.observation_id = OLD.observation_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'immutability violation: DELETE on intake.observations is not allowed'
        USING ERRCODE = 'OB202',
              DETAIL = 'an accepted observation leaves only through intake.purge_observation_payloads, which writes its purge marker first';
END
$fn$;
REVOKE ALL ON FUNCTION intake.tg_observations__purge_delete() FROM PUBLIC;


-- verify_purge_run re-derives eligibility from the immutable facts
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


-- 3. register_workload refuses shared and already-bound roles
CREATE OR REPLACE FUNCTION intake.register_workload(p_db_role name, p_workload_principal_id text, p_service text, p_environment text, p_max_per_minute integer DEFAULT 6000, p_max_body_bytes integer DEFAULT 16384, p_deployment_id text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_old intake.workloads;
BEGIN
    IF p_db_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_db_role) THEN
        RAISE EXCEPTION 'intake: role % does not exist', p_db_role USING ERRCODE = '22023';
    END IF;
    -- a shared role would let every login granted it submit as this workload (R-OB-1, R-SEC-5)
    IF p_db_role IN ('outbox_owner', 'outbox_registrar', 'outbox_producer', 'outbox_dispatcher', 'outbox_consumer',
                     'outbox_auditor', 'outbox_operator', 'outbox_retention', 'outbox_mailbox', 'outbox_intake',
                     'outbox_observation_projector', 'outbox_projector')
       OR p_db_role LIKE 'pg\_%'
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_db_role AND (r.rolsuper OR r.rolname = 'public')) THEN
        RAISE EXCEPTION 'intake: a kernel, built-in or superuser role cannot be registered as a workload'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('role %I is shared by many logins; register a role of this workload''s own (granted outbox_intake)', p_db_role);
    END IF;
    IF EXISTS (SELECT 1 FROM inbox.consumer_roles c WHERE c.role_name = p_db_role) THEN
        RAISE EXCEPTION 'intake: role % is bound to a consumer', p_db_role
            USING ERRCODE = '22023', DETAIL = 'a workload role is a role of its own, never a consumer''s role (inbox.consumer_roles)';
    END IF;
    IF p_workload_principal_id IS NULL OR p_workload_principal_id !~ '^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$'
       OR p_service IS NULL OR p_service !~ '^[a-z0-9][a-z0-9._-]{0,99}$'
       OR p_environment IS NULL OR p_environment !~ '^[a-z0-9][a-z0-9._-]{0,63}$'
       OR (p_deployment_id IS NOT NULL AND p_deployment_id !~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$') THEN
        RAISE EXCEPTION 'intake: workload literal out of form'
            USING ERRCODE = '22023',
                  DETAIL = 'workload_principal_id [A-Za-z0-9._:/@-]{1,200}, service and environment lower-case literals, deployment_id [A-Za-z0-9._:-]{1,128}';
    END IF;
    IF p_max_per_minute IS NULL OR p_max_per_minute NOT BETWEEN 1 AND 10000000
       OR p_max_body_bytes IS NULL OR p_max_body_bytes NOT BETWEEN 2 AND 1048576 THEN
        RAISE EXCEPTION 'intake: quota out of bounds'
            USING ERRCODE = '22023', DETAIL = 'max_per_minute 1..10000000, max_body_bytes 2..1048576';
    END IF;
    INSERT INTO intake.workloads (db_role, workload_principal_id, service, environment, deployment_id, max_per_minute, max_body_bytes)
    VALUES (p_db_role, p_workload_principal_id, p_service, p_environment, p_deployment_id, p_max_per_minute, p_max_body_bytes)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT w.* INTO v_old FROM intake.workloads w
    WHERE w.db_role = p_db_role OR w.workload_principal_id = p_workload_principal_id
    ORDER BY w.db_role = p_db_role DESC LIMIT 1;
    IF v_old.db_role IS DISTINCT FROM p_db_role OR v_old.workload_principal_id IS DISTINCT FROM p_workload_principal_id
       OR v_old.service IS DISTINCT FROM p_service OR v_old.environment IS DISTINCT FROM p_environment
       OR v_old.deployment_id IS DISTINCT FROM p_deployment_id OR v_old.max_per_minute IS DISTINCT FROM p_max_per_minute
       OR v_old.max_body_bytes IS DISTINCT FROM p_max_body_bytes THEN
        RAISE EXCEPTION 'intake: workload already registered with other values'
            USING ERRCODE = 'OB702',
                  DETAIL = pg_catalog.format('role %I / principal %s: registrations are immutable (insert-or-compare)', p_db_role, p_workload_principal_id);
    END IF;
END
$function$;

COMMENT ON FUNCTION intake.register_workload(name, text, text, text, integer, integer, text) IS
    'Bind a database role to a trusted observation source with its quota; insert-or-compare, OB702 on other values (SPEC R-OB-1, R-OB-6) Kernel (the outbox_* group roles), built-in (pg_*), superuser and consumer-bound roles are refused (22023); a role already registered as another workload is OB702.';


-- 4. observation claims and acks bound to the caller's role
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
    -- every consumer named must be bound to the calling role (42501, R-SEC-5)
    PERFORM inbox._inbox_check_caller(c.cn)
       FROM (SELECT DISTINCT x.e ->> 'consumerName' AS cn
               FROM pg_catalog.json_array_elements(p_items) AS x(e)
              WHERE pg_catalog.json_typeof(x.e) = 'object' AND pg_catalog.json_typeof(x.e -> 'consumerName') = 'string'
              LIMIT 1001) AS c;
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
    'Acknowledge leased observations, fenced like ack_deliveries: lease token (a finished, expired or replaced lease - a second ack included - is OB001), accepted envelope digest and the consumer''s receipt for every registered projection (OB002); one row per item, in input order (SPEC R-OB-4). Every consumer named must be bound to the calling role (42501, R-SEC-5). Caller: outbox_observation_projector.';


-- 5. legal holds cover accepted observations (R-OB-7)
CREATE OR REPLACE FUNCTION outbox.set_legal_hold(p_event_id uuid, p_reason text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_reason IS NULL OR pg_catalog.btrim(p_reason) = '' OR pg_catalog.length(p_reason) > 500 THEN
        RAISE EXCEPTION 'set_legal_hold: reason must be a non-empty text of at most 500 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM outbox.outbox_events e WHERE e.event_id = p_event_id FOR KEY SHARE;
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM outbox.archived_events a WHERE a.event_id = p_event_id)
       AND NOT EXISTS (SELECT 1 FROM intake.observation_ids o WHERE o.observation_id = p_event_id) THEN
        RAISE EXCEPTION 'set_legal_hold: unknown event'
            USING ERRCODE = 'no_data_found', DETAIL = pg_catalog.format('%s is neither an event (hot or archived) nor an accepted observation', p_event_id);
    END IF;
    INSERT INTO outbox.legal_holds (event_id, reason, set_by)
    VALUES (p_event_id, p_reason, session_user)
    ON CONFLICT (event_id) WHERE released_at IS NULL DO NOTHING;
END
$function$;

COMMENT ON FUNCTION outbox.set_legal_hold(uuid, text) IS
    'Place an audited legal hold on an event or an accepted observation (by id); archive_events never archives a held event, purge_observation_payloads never purges a held observation (SPEC R-RT-1, R-OB-7). Caller: outbox_retention.';


RESET ROLE;
