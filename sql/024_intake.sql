-- Observation intake (SPEC §11a R-OB-1..R-OB-7, §13 "Observation intake", T-9; codes OB701..OB704).
-- Best-effort operational evidence (request attempts, error occurrences) kept apart from domain
-- events in a schema of its own, `intake`:
--   * the workload registry (session role -> trusted source), closed observation schemas with
--     their members, the per-workload normalization-policy matrix, registered observation
--     projectors;
--   * the permanent observation-id registry (survives payload purge), the immutable accepted
--     observations (payload), append-only purge markers and purge runs, append-only conflict
--     audit rows, per-workload minute counters (quota and intake rejections), reported send
--     failures;
--   * inbox.observation_receipts, the observation projector's receipts (read by the purge: a
--     payload is purged only when every registered projector has its receipt);
--   * the functions of §13 (SECURITY DEFINER, owned by outbox_owner, pinned search_path, nothing
--     for PUBLIC).
-- Roles: outbox_intake (accept, record_send_failures: EXECUTE only, no table),
--   outbox_observation_projector (claim/ack: created here for the projector path);
--   outbox_registrar registers, outbox_retention purges, outbox_auditor reads health windows and
--   verifies purge runs.
-- Applied to a running database: new schema, tables and functions only; no lock on any existing
-- kernel table.
-- One NOLOGIN group role whose name is the template argument (a migration includes this file with
-- the role name as the template data; SPEC R-SEC-1). Roles are cluster-wide: created idempotently, tolerant of a parallel template
-- build creating the same role at the same moment (duplicate_object), as roles/create_roles.sql
-- does for the first six roles. Operators grant it to login users.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_intake') THEN
        BEGIN
            CREATE ROLE outbox_intake NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;

-- One NOLOGIN group role whose name is the template argument (a migration includes this file with
-- the role name as the template data; SPEC R-SEC-1). Roles are cluster-wide: created idempotently, tolerant of a parallel template
-- build creating the same role at the same moment (duplicate_object), as roles/create_roles.sql
-- does for the first six roles. Operators grant it to login users.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_observation_projector') THEN
        BEGIN
            CREATE ROLE outbox_observation_projector NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;


SET LOCAL ROLE outbox_owner;

CREATE SCHEMA intake AUTHORIZATION outbox_owner;
REVOKE ALL ON SCHEMA intake FROM PUBLIC;
COMMENT ON SCHEMA intake IS 'pgoutbox observation intake: best-effort operational evidence, accepted exactly once, content-addressed (SPEC §11a)';
GRANT USAGE ON SCHEMA intake TO outbox_intake, outbox_registrar, outbox_retention, outbox_auditor, outbox_observation_projector;

-- R-OB-1: the trusted source of a session role. One row per database role; a workload principal
-- is bound to exactly one role. Immutable (insert-or-compare by intake.register_workload).
CREATE TABLE intake.workloads (
    db_role               name PRIMARY KEY,
    workload_principal_id text NOT NULL UNIQUE CHECK (workload_principal_id ~ '^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$'),
    service               text NOT NULL CHECK (service ~ '^[a-z0-9][a-z0-9._-]{0,99}$'),
    environment           text NOT NULL CHECK (environment ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    deployment_id         text CHECK (deployment_id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    max_per_minute        integer NOT NULL CHECK (max_per_minute BETWEEN 1 AND 10000000),
    max_body_bytes        integer NOT NULL CHECK (max_body_bytes BETWEEN 2 AND 1048576),
    registered_at         timestamptz NOT NULL DEFAULT now()
);

-- R-OB-1: a closed observation schema. definition_canonical is the jcs-sha256-v1 text of the
-- registered definition, schema_sha256 its digest; the members are its parsed form.
CREATE TABLE intake.observation_schemas (
    observation_type           text NOT NULL CHECK (observation_type ~ '^[a-z][a-z0-9_]{0,63}$'),
    observation_schema_version integer NOT NULL CHECK (observation_schema_version BETWEEN 1 AND 1000000),
    definition_canonical       text NOT NULL,
    schema_sha256              text NOT NULL CHECK (schema_sha256 ~ '^[0-9a-f]{64}$'),
    discriminator              text,
    policy_version_member      text,
    normalized_code_member     text,
    registered_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (observation_type, observation_schema_version)
);

CREATE TABLE intake.observation_schema_members (
    observation_type           text NOT NULL,
    observation_schema_version integer NOT NULL,
    member                     text NOT NULL CHECK (member ~ '^[a-z][A-Za-z0-9]{0,63}$'),
    member_type                text NOT NULL CHECK (member_type IN ('string', 'integer', 'boolean', 'uuid', 'timestamp', 'enum')),
    required                   boolean NOT NULL,
    nullable                   boolean NOT NULL,
    min_length                 integer NOT NULL DEFAULT 0 CHECK (min_length >= 0),
    max_length                 integer NOT NULL DEFAULT 256 CHECK (max_length >= min_length AND max_length <= 4096),
    minimum                    bigint,
    maximum                    bigint,
    enum_values                text[],
    branches                   text[],
    PRIMARY KEY (observation_type, observation_schema_version, member),
    FOREIGN KEY (observation_type, observation_schema_version) REFERENCES intake.observation_schemas
);

-- R-OB-1: the normalization-policy matrix: which policy versions and normalized codes a workload
-- may send.
CREATE TABLE intake.normalization_policies (
    workload_principal_id text NOT NULL REFERENCES intake.workloads (workload_principal_id),
    policy_version        text NOT NULL CHECK (policy_version ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$'),
    normalized_codes      text[] NOT NULL CHECK (cardinality(normalized_codes) BETWEEN 1 AND 10000),
    registered_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workload_principal_id, policy_version)
);

-- R-OB-4, R-OB-7: the registered observation projectors (purge waits for each one's receipt).
CREATE TABLE intake.observation_projectors (
    consumer_name      text NOT NULL CHECK (consumer_name ~ '^[a-z0-9][a-z0-9._-]{0,99}$'),
    projection_name    text NOT NULL CHECK (projection_name ~ '^[a-z0-9][a-z0-9._-]{0,99}$'),
    projection_version integer NOT NULL CHECK (projection_version >= 1),
    registered_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, projection_name, projection_version)
);

-- R-OB-2: the permanent id registry. One row per accepted observation id, written in the same
-- transaction as the payload; it survives the payload purge and is never updated or deleted,
-- so an id can never be re-bound or an old submission revived.
CREATE TABLE intake.observation_ids (
    observation_id            uuid PRIMARY KEY,
    workload_principal_id     text NOT NULL,
    digest_algorithm_version  text NOT NULL CHECK (digest_algorithm_version = 'jcs-sha256-v1'),
    submission_payload_sha256 text NOT NULL CHECK (submission_payload_sha256 ~ '^[0-9a-f]{64}$'),
    accepted_envelope_sha256  text NOT NULL CHECK (accepted_envelope_sha256 ~ '^[0-9a-f]{64}$'),
    accepted_at               timestamptz NOT NULL
);
CREATE INDEX observation_ids_accepted ON intake.observation_ids (accepted_at, observation_id);
CREATE INDEX observation_ids_workload_accepted ON intake.observation_ids (workload_principal_id, accepted_at);

-- R-OB-3: the accepted observations (AcceptedObservationEnvelope@1, canonical text and parsed
-- form). Immutable; a row leaves only through intake.purge_observation_payloads (R-OB-7).
CREATE TABLE intake.observations (
    observation_id             uuid PRIMARY KEY REFERENCES intake.observation_ids (observation_id),
    accepted_at                timestamptz NOT NULL,
    workload_principal_id      text NOT NULL,
    observation_type           text NOT NULL,
    observation_schema_version integer NOT NULL,
    source_claimed_observed_at text,
    accepted_envelope_canonical text NOT NULL,
    accepted_envelope          jsonb NOT NULL,
    accepted_envelope_sha256   text NOT NULL
);
CREATE INDEX observations_accepted ON intake.observations (accepted_at, observation_id);

-- R-OB-7: one append-only marker per purged payload and one run row per purge, written last.
CREATE TABLE intake.purge_runs (
    run_id            uuid PRIMARY KEY,
    run_by            text NOT NULL,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz NOT NULL,
    older_than        interval NOT NULL,
    max_rows          integer NOT NULL,
    cutoff            timestamptz NOT NULL,
    purged            integer NOT NULL CHECK (purged >= 0),
    skipped           integer NOT NULL CHECK (skipped >= 0),
    purged_set_sha256 text NOT NULL CHECK (purged_set_sha256 ~ '^[0-9a-f]{64}$')
);

CREATE TABLE intake.observation_purge_markers (
    observation_id           uuid PRIMARY KEY REFERENCES intake.observation_ids (observation_id),
    run_id                   uuid NOT NULL,
    accepted_at              timestamptz NOT NULL,
    accepted_envelope_sha256 text NOT NULL,
    purged_at                timestamptz NOT NULL
);
CREATE INDEX observation_purge_markers_run ON intake.observation_purge_markers (run_id);

-- R-OB-2: low-sensitivity audit of integrity conflicts: ids, both sources, the reason class; no
-- body, no digest of the first submission.
CREATE TABLE intake.observation_conflicts (
    conflict_id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    observation_id         uuid NOT NULL,
    first_workload_id      text NOT NULL,
    second_workload_id     text NOT NULL,
    reason                 text NOT NULL CHECK (reason IN ('other_source', 'other_algorithm', 'other_digest')),
    recorded_at            timestamptz NOT NULL DEFAULT now()
);

-- R-OB-5, R-OB-6: per workload and minute (of the accepting transaction's now()): accepted_new
-- count (the quota's measure), intake rejections and how many of them were quota refusals. The
-- row is locked by every accept call of its workload in that minute (the quota is exact).
CREATE TABLE intake.workload_minutes (
    workload_principal_id text NOT NULL,
    minute                timestamptz NOT NULL,
    accepted              integer NOT NULL DEFAULT 0,
    rejected              integer NOT NULL DEFAULT 0,
    quota_rejected        integer NOT NULL DEFAULT 0,
    PRIMARY KEY (workload_principal_id, minute)
);

-- R-OB-5: what a workload reports it could not send (like client discard reports).
CREATE TABLE intake.send_failures (
    report_id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workload_principal_id text NOT NULL,
    failed                integer NOT NULL CHECK (failed >= 1),
    window_start          timestamptz NOT NULL,
    window_end            timestamptz NOT NULL CHECK (window_end > window_start),
    reason                text NOT NULL CHECK (reason ~ '^[a-z0-9][a-z0-9._:-]{0,63}$'),
    recorded_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX send_failures_window ON intake.send_failures (window_start);

-- R-OB-4: the observation projector's receipts (consumer side, like inbox.inbox_receipts).
CREATE TABLE inbox.observation_receipts (
    consumer_name            text NOT NULL,
    projection_name          text NOT NULL,
    projection_version       integer NOT NULL,
    observation_id           uuid NOT NULL,
    digest_algorithm_version text NOT NULL CHECK (digest_algorithm_version = 'jcs-sha256-v1'),
    accepted_envelope_sha256 text NOT NULL CHECK (accepted_envelope_sha256 ~ '^[0-9a-f]{64}$'),
    recorded_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, projection_name, projection_version, observation_id)
);

-- Immutability of the intake's evidence (SPEC R-OB-2, R-OB-3, R-OB-7; OB202):
--   * registries (workloads, observation schemas and members, normalization policies,
--     projectors), the id registry, purge markers, purge runs, conflict audit rows and send
--     failure reports: no UPDATE, no DELETE, no TRUNCATE, by any role (the owner included);
--   * accepted observations: no UPDATE, no TRUNCATE; a DELETE only for rows whose purge marker
--     was written by the purge run in progress in this transaction (transaction-local setting
--     pgintake.purge_run names a run that has no intake.purge_runs row yet; only
--     intake.purge_observation_payloads sets it, and only the owner can write markers).
CREATE FUNCTION intake.tg_intake__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on intake.% is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'intake evidence is append-only (SPEC R-OB-2, R-OB-3, R-OB-7)';
END
$fn$;
REVOKE ALL ON FUNCTION intake.tg_intake__immutable() FROM PUBLIC;

CREATE FUNCTION intake.tg_observations__purge_delete() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_run text := coalesce(pg_catalog.current_setting('pgintake.purge_run', true), '');
BEGIN
    IF v_run ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
       AND NOT EXISTS (SELECT 1 FROM intake.purge_runs r WHERE r.run_id = v_run::uuid)
       AND EXISTS (SELECT 1 FROM intake.observation_purge_markers m
                   WHERE m.observation_id = OLD.observation_id AND m.run_id = v_run::uuid) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'immutability violation: DELETE on intake.observations is not allowed'
        USING ERRCODE = 'OB202',
              DETAIL = 'an accepted observation leaves only through intake.purge_observation_payloads, which writes its purge marker first';
END
$fn$;
REVOKE ALL ON FUNCTION intake.tg_observations__purge_delete() FROM PUBLIC;

DO $tg$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['workloads', 'observation_schemas', 'observation_schema_members',
                                   'normalization_policies', 'observation_projectors', 'observation_ids',
                                   'observation_purge_markers', 'purge_runs', 'observation_conflicts',
                                   'send_failures']
    LOOP
        EXECUTE pg_catalog.format('CREATE TRIGGER tg_%1$s__immutable BEFORE UPDATE OR DELETE ON intake.%1$I
                                   FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable()', v_table);
        EXECUTE pg_catalog.format('CREATE TRIGGER tg_%1$s__no_truncate BEFORE TRUNCATE ON intake.%1$I
                                   FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable()', v_table);
    END LOOP;
END
$tg$;

CREATE TRIGGER tg_observations__no_update BEFORE UPDATE ON intake.observations
    FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_observations__no_truncate BEFORE TRUNCATE ON intake.observations
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_observations__purge_delete BEFORE DELETE ON intake.observations
    FOR EACH ROW EXECUTE FUNCTION intake.tg_observations__purge_delete();

-- The observation projector's receipts are append-only like inbox.inbox_receipts (R-OB-4).
CREATE TRIGGER tg_observation_receipts__immutable BEFORE UPDATE OR DELETE ON inbox.observation_receipts
    FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_observation_receipts__no_truncate BEFORE TRUNCATE ON inbox.observation_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();


-- intake._intake_caller() RETURNS intake.workloads  (private helper, SPEC R-OB-1)
-- The trusted source of the calling session: the workload registered for the calling role. The
-- calling role is the role the session switched to with SET ROLE, else the session user (inside
-- a SECURITY DEFINER function current_user is the owner; the role setting still names the
-- caller's SET ROLE, which PostgreSQL only lets a session set to a role it is a member of), as
-- inbox._inbox_check_caller does. Never anything the submission says.
-- SQLSTATEs: OB704 the calling role is not a registered workload. Locking: none.
-- Caller: intake.accept_observations, intake.record_send_failures; granted to nobody.
CREATE FUNCTION intake._intake_caller()
RETURNS intake.workloads
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_caller name := coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user)::name;
    v_w      intake.workloads;
BEGIN
    SELECT w.* INTO v_w FROM intake.workloads AS w WHERE w.db_role = v_caller;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'intake: session role % is not a registered workload', v_caller
            USING ERRCODE = 'OB704',
                  DETAIL = 'the trusted source comes from the workload registry, never from the submission',
                  HINT = 'the registrar registers the role: SELECT intake.register_workload(role, workload_principal_id, service, environment)';
    END IF;
    RETURN v_w;
END
$fn$;
COMMENT ON FUNCTION intake._intake_caller() IS
    'Private: the registered workload of the calling role; OB704 when there is none (SPEC R-OB-1).';
REVOKE ALL ON FUNCTION intake._intake_caller() FROM PUBLIC;

-- intake.register_workload(db_role name, workload_principal_id text, service text, environment
--   text, max_per_minute int DEFAULT 6000, max_body_bytes int DEFAULT 16384, deployment_id text
--   DEFAULT NULL) RETURNS void  (public, SPEC R-OB-1, R-OB-6, §13)
-- Purpose: bind a database role to a trusted source (workload principal, service, environment,
--   optional deployment) with its quota (accepted observations per minute) and its maximum body
--   size. Insert-or-compare: the same registration again is a no-op; any difference raises.
-- Locking: the primary key (a concurrent identical registration waits and then compares).
-- SQLSTATEs: 22023 an argument out of its form (role not existing, literal forms, bounds);
--   OB702 the role or the principal is already registered with other values.
-- Caller: outbox_registrar.
CREATE FUNCTION intake.register_workload(p_db_role name, p_workload_principal_id text, p_service text,
                                         p_environment text, p_max_per_minute integer DEFAULT 6000,
                                         p_max_body_bytes integer DEFAULT 16384, p_deployment_id text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_old intake.workloads;
BEGIN
    IF p_db_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_db_role) THEN
        RAISE EXCEPTION 'intake: role % does not exist', p_db_role USING ERRCODE = '22023';
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
$fn$;
COMMENT ON FUNCTION intake.register_workload(name, text, text, text, integer, integer, text) IS
    'Bind a database role to a trusted observation source with its quota; insert-or-compare, OB702 on other values (SPEC R-OB-1, R-OB-6).';
REVOKE ALL ON FUNCTION intake.register_workload(name, text, text, text, integer, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.register_workload(name, text, text, text, integer, integer, text) TO outbox_registrar;

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
CREATE FUNCTION intake.register_observation_schema(p_observation_type text, p_observation_schema_version integer,
                                                   p_definition json)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
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
BEGIN
    IF p_observation_type IS NULL OR p_observation_type !~ '^[a-z][a-z0-9_]{0,63}$'
       OR p_observation_schema_version IS NULL OR p_observation_schema_version NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'intake: observation type or schema version out of form'
            USING ERRCODE = 'OB702', DETAIL = 'type [a-z][a-z0-9_]{0,63}, version 1..1000000';
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
            WHEN v_m.key !~ '^[a-z][A-Za-z0-9]{0,63}$' THEN 'member name not [a-z][A-Za-z0-9]{0,63}'
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
$fn$;
COMMENT ON FUNCTION intake.register_observation_schema(text, integer, json) IS
    'Register a closed observation body schema; returns its jcs-sha256-v1 digest; insert-or-compare, OB702 on another definition (SPEC R-OB-1).';
REVOKE ALL ON FUNCTION intake.register_observation_schema(text, integer, json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.register_observation_schema(text, integer, json) TO outbox_registrar;

-- intake.register_normalization_policy(workload_principal_id text, policy_version text,
--   normalized_codes text[]) RETURNS void  (public, SPEC R-OB-1, §13)
-- Purpose: one cell of the per-workload normalization-policy matrix: the workload may send
--   errorNormalizationPolicyVersion = policy_version with a normalized code among
--   normalized_codes. Insert-or-compare (the code set is compared as a sorted, distinct set).
-- Locking: the primary key.
-- SQLSTATEs: 22023 unknown workload, literal out of form, empty or malformed code list;
--   OB702 the cell is registered with another code set.
-- Caller: outbox_registrar.
CREATE FUNCTION intake.register_normalization_policy(p_workload_principal_id text, p_policy_version text,
                                                     p_normalized_codes text[])
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_codes text[];
    v_old   text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM intake.workloads w WHERE w.workload_principal_id = p_workload_principal_id) THEN
        RAISE EXCEPTION 'intake: unknown workload principal %', p_workload_principal_id USING ERRCODE = '22023';
    END IF;
    IF p_policy_version IS NULL OR p_policy_version !~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$' THEN
        RAISE EXCEPTION 'intake: policy version out of form' USING ERRCODE = '22023';
    END IF;
    SELECT pg_catalog.array_agg(DISTINCT c COLLATE "C" ORDER BY c COLLATE "C") INTO v_codes FROM pg_catalog.unnest(p_normalized_codes) c;
    IF v_codes IS NULL OR EXISTS (SELECT 1 FROM pg_catalog.unnest(v_codes) c WHERE c IS NULL OR c !~ '^[a-z0-9][a-z0-9._:-]{0,127}$') THEN
        RAISE EXCEPTION 'intake: normalized codes out of form'
            USING ERRCODE = '22023', DETAIL = 'at least one code, each [a-z0-9._:-]{1,128}';
    END IF;
    INSERT INTO intake.normalization_policies (workload_principal_id, policy_version, normalized_codes)
    VALUES (p_workload_principal_id, p_policy_version, v_codes)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT p.normalized_codes INTO v_old FROM intake.normalization_policies p
    WHERE p.workload_principal_id = p_workload_principal_id AND p.policy_version = p_policy_version;
    IF v_old IS DISTINCT FROM v_codes THEN
        RAISE EXCEPTION 'intake: normalization policy already registered with other codes'
            USING ERRCODE = 'OB702',
                  DETAIL = pg_catalog.format('workload %s policy %s: registrations are immutable (insert-or-compare)', p_workload_principal_id, p_policy_version);
    END IF;
END
$fn$;
COMMENT ON FUNCTION intake.register_normalization_policy(text, text, text[]) IS
    'One cell of the per-workload normalization-policy matrix; insert-or-compare, OB702 on other codes (SPEC R-OB-1).';
REVOKE ALL ON FUNCTION intake.register_normalization_policy(text, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.register_normalization_policy(text, text, text[]) TO outbox_registrar;

-- intake.register_observation_projector(consumer_name text, projection_name text,
--   projection_version int) RETURNS void  (public, SPEC R-OB-4, R-OB-7, §13)
-- Purpose: register an observation projector; the payload purge waits for a receipt of every
--   registered projector. Insert-or-compare (the same triple again is a no-op).
-- Locking: the primary key. SQLSTATEs: 22023 literal out of form.
-- Caller: outbox_registrar.
CREATE FUNCTION intake.register_observation_projector(p_consumer_name text, p_projection_name text,
                                                      p_projection_version integer)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
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
$fn$;
COMMENT ON FUNCTION intake.register_observation_projector(text, text, integer) IS
    'Register an observation projector (purge waits for its receipts); insert-or-compare (SPEC R-OB-4, R-OB-7).';
REVOKE ALL ON FUNCTION intake.register_observation_projector(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.register_observation_projector(text, text, integer) TO outbox_registrar;

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
CREATE FUNCTION intake.accept_observations(p_submissions json)
RETURNS TABLE (outcome text, observation_id uuid, accepted_at timestamptz, submission_payload_sha256 text,
               accepted_envelope_sha256 text, sqlstate text, detail text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
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
               '{' || pg_catalog.string_agg(pg_catalog.to_json(bp.nkey)::text || ':' || bp.canon, ',' ORDER BY bp.nkey COLLATE "C") || '}' AS body_canon,
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
$fn$;
COMMENT ON FUNCTION intake.accept_observations(json) IS
    'Accept a batch of observation submissions from the calling workload: one row per item in input order (accepted_new | accepted_existing | accepted_existing_purged | conflict | rejected); OB704 when the role is not a workload (SPEC R-OB-1, R-OB-2, R-OB-6).';
REVOKE ALL ON FUNCTION intake.accept_observations(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.accept_observations(json) TO outbox_intake;

-- intake.accept_observation(submission json)
--   RETURNS TABLE (outcome text, observation_id uuid, accepted_at timestamptz,
--                  submission_payload_sha256 text, accepted_envelope_sha256 text, sqlstate text, detail text)
--   (public, SPEC R-OB-1, R-OB-2, §13)
-- Purpose: one submission; exactly intake.accept_observations of a one-item array (the same
--   rules, the same row). SQLSTATEs: OB704 (raised); item refusals come back as the row.
-- Caller: outbox_intake.
CREATE FUNCTION intake.accept_observation(p_submission json)
RETURNS TABLE (outcome text, observation_id uuid, accepted_at timestamptz, submission_payload_sha256 text,
               accepted_envelope_sha256 text, sqlstate text, detail text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY SELECT a.outcome, a.observation_id, a.accepted_at, a.submission_payload_sha256,
                        a.accepted_envelope_sha256, a.sqlstate, a.detail
                 FROM intake.accept_observations(pg_catalog.json_build_array(p_submission)) AS a;
END
$fn$;
COMMENT ON FUNCTION intake.accept_observation(json) IS
    'Accept one observation submission (intake.accept_observations of one item) (SPEC R-OB-1, R-OB-2).';
REVOKE ALL ON FUNCTION intake.accept_observation(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.accept_observation(json) TO outbox_intake;

-- intake.record_send_failures(failed int, window_start timestamptz, window_end timestamptz,
--   reason text) RETURNS void  (public, SPEC R-OB-5, §13)
-- Purpose: the calling workload reports how many observations it could not send in a window
--   (like client discard reports); counted as known send failures in the health windows that
--   the report's window_start falls in. The workload comes from the session role (OB704).
-- Reason: a low-cardinality literal ([a-z0-9][a-z0-9._:-]{0,63}, e.g. timeout, queue_full,
--   quota), never a payload.
-- SQLSTATEs: OB704 the calling role is not a registered workload; 22023 failed < 1 or > 10^9,
--   a window that is empty, longer than a day or ends more than 5 minutes in the future, a
--   reason out of form.
-- Caller: outbox_intake.
CREATE FUNCTION intake.record_send_failures(p_failed integer, p_window_start timestamptz, p_window_end timestamptz,
                                            p_reason text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_w intake.workloads := intake._intake_caller();
BEGIN
    IF p_failed IS NULL OR p_failed NOT BETWEEN 1 AND 1000000000 THEN
        RAISE EXCEPTION 'intake: failed must be 1..1000000000' USING ERRCODE = '22023';
    END IF;
    IF p_window_start IS NULL OR p_window_end IS NULL OR p_window_end <= p_window_start
       OR p_window_end - p_window_start > interval '1 day'
       OR p_window_end > pg_catalog.now() + interval '5 minutes' THEN
        RAISE EXCEPTION 'intake: send failure window out of bounds'
            USING ERRCODE = '22023', DETAIL = 'window_start < window_end, at most one day long, not ending in the future';
    END IF;
    IF p_reason IS NULL OR p_reason !~ '^[a-z0-9][a-z0-9._:-]{0,63}$' THEN
        RAISE EXCEPTION 'intake: reason must be a low-cardinality literal [a-z0-9._:-]{1,64}' USING ERRCODE = '22023';
    END IF;
    INSERT INTO intake.send_failures (workload_principal_id, failed, window_start, window_end, reason)
    VALUES (v_w.workload_principal_id, p_failed, p_window_start, p_window_end, p_reason);
END
$fn$;
COMMENT ON FUNCTION intake.record_send_failures(integer, timestamptz, timestamptz, text) IS
    'The calling workload reports observations it could not send in a window (SPEC R-OB-5).';
REVOKE ALL ON FUNCTION intake.record_send_failures(integer, timestamptz, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.record_send_failures(integer, timestamptz, timestamptz, text) TO outbox_intake;

-- intake.accepted_health_windows(from_time timestamptz, to_time timestamptz, width interval)
--   RETURNS TABLE (workload_principal_id text, window_start timestamptz, window_end timestamptz,
--                  accepted int, last_accepted_at timestamptz, send_failures int,
--                  intake_rejections int, health text)
--   (public, SPEC R-OB-5, §13)
-- Purpose: health, not coverage: per registered workload and window what the intake heard
--   (accepted, last acceptedAt, send failures, rejections) and health unknown | degraded |
--   healthy. No percentage: there is no authoritative denominator.
-- Locking: none (reads). SQLSTATEs: 22023 from/to NULL or to <= from, width below one minute,
--   more than 10000 windows.
-- Design notes (what each column counts): docs/intake.md#intakeaccepted_health_windows
-- Caller: outbox_auditor.
CREATE FUNCTION intake.accepted_health_windows(p_from_time timestamptz, p_to_time timestamptz, p_width interval)
RETURNS TABLE (workload_principal_id text, window_start timestamptz, window_end timestamptz, accepted integer,
               last_accepted_at timestamptz, send_failures integer, intake_rejections integer, health text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    IF p_from_time IS NULL OR p_to_time IS NULL OR p_to_time <= p_from_time OR p_width IS NULL OR p_width < interval '1 minute' THEN
        RAISE EXCEPTION 'intake: health window arguments out of bounds'
            USING ERRCODE = '22023', DETAIL = 'from_time < to_time, width at least one minute';
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
    LEFT JOIN LATERAL (SELECT pg_catalog.sum(m.rejected) AS n FROM intake.workload_minutes m
                       WHERE m.workload_principal_id = c.wp AND m.minute >= c.ws AND m.minute < c.we) rj ON true
    ORDER BY c.wp, c.ws;
END
$fn$;
COMMENT ON FUNCTION intake.accepted_health_windows(timestamptz, timestamptz, interval) IS
    'Per workload and window: accepted count, last acceptedAt, known send failures, intake rejections and healthy | degraded | unknown; no coverage percentage (SPEC R-OB-5).';
REVOKE ALL ON FUNCTION intake.accepted_health_windows(timestamptz, timestamptz, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.accepted_health_windows(timestamptz, timestamptz, interval) TO outbox_auditor;

-- intake.purge_observation_payloads(older_than interval, max_rows int DEFAULT 1000)
--   RETURNS TABLE (run_id uuid, purged int, skipped int, purged_set_sha256 text)
--   (public, SPEC R-OB-7, §13)
-- Purpose: the audited payload purge: removes the payload of up to max_rows observations accepted
--   before now() - older_than (oldest first) that every registered projector acknowledged with a
--   receipt and that no legal hold covers; the others are skipped. Purge markers first, then the
--   deletes, then the run row. The id registry is never touched.
-- Locking: FOR UPDATE SKIP LOCKED of the examined rows (concurrent runs take disjoint sets).
-- SQLSTATEs: 22023 older_than NULL or negative, max_rows outside 1..100000.
-- Design notes: docs/intake.md#intakepurge_observation_payloads
-- Caller: outbox_retention.
CREATE FUNCTION intake.purge_observation_payloads(p_older_than interval, p_max_rows integer DEFAULT 1000)
RETURNS TABLE (run_id uuid, purged integer, skipped integer, purged_set_sha256 text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
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
    PERFORM pg_catalog.set_config('pgintake.purge_run', v_run::text, true);

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
$fn$;
COMMENT ON FUNCTION intake.purge_observation_payloads(interval, integer) IS
    'Purge payloads of old accepted observations every registered projector has a receipt for (no legal hold): markers, then deletes, then the run row with purged_set_sha256 (SPEC R-OB-7).';
REVOKE ALL ON FUNCTION intake.purge_observation_payloads(interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.purge_observation_payloads(interval, integer) TO outbox_retention;

-- intake.verify_purge_run(run_id uuid) RETURNS TABLE (run_id uuid, verified bool, problem text)
--   (public, SPEC R-OB-7, §13)
-- Purpose: re-check a purge run from its evidence: the run row exists; its markers are exactly
--   `purged` ids; purged_set_sha256 recomputes from the markers; no payload of a marked id
--   remains; every marked id is still in the id registry with the marker's acceptedAt and
--   acceptedEnvelopeSha256. problem names the first failed check (NULL when verified).
-- Locking: none (reads). SQLSTATEs: none (an unknown run is verified = false).
-- Caller: outbox_auditor, outbox_retention.
CREATE FUNCTION intake.verify_purge_run(p_run_id uuid)
RETURNS TABLE (run_id uuid, verified boolean, problem text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
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
    ELSE
        RETURN QUERY SELECT p_run_id, true, NULL::text;
    END IF;
END
$fn$;
COMMENT ON FUNCTION intake.verify_purge_run(uuid) IS
    'Re-check a purge run: marker count, purged_set_sha256, no payload left, registry agreement (SPEC R-OB-7).';
REVOKE ALL ON FUNCTION intake.verify_purge_run(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.verify_purge_run(uuid) TO outbox_auditor, outbox_retention;


RESET ROLE;
