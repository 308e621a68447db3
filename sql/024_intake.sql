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
{{ template "roles/create_group_role.sql" "outbox_intake" }}
{{ template "roles/create_group_role.sql" "outbox_observation_projector" }}

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

{{ template "triggers/intake_tables__immutable.sql" . }}

{{ template "functions/_intake_caller.sql" . }}
{{ template "functions/register_workload.sql" . }}
{{ template "functions/register_observation_schema.sql" . }}
{{ template "functions/register_normalization_policy.sql" . }}
{{ template "functions/register_observation_projector.sql" . }}
{{ template "functions/accept_observations.sql" . }}
{{ template "functions/accept_observation.sql" . }}
{{ template "functions/record_send_failures.sql" . }}
{{ template "functions/accepted_health_windows.sql" . }}
{{ template "functions/purge_observation_payloads.sql" . }}
{{ template "functions/verify_purge_run.sql" . }}

RESET ROLE;
