-- Projection versions, slice R-PV-1: the version registry and shadow rebuilds (SPEC §11b, §13
-- "Projection versions"; codes OB801, OB802, OB001; docs/projection-versions.md).
--   * outbox.projection_versions: one row per (projection_name, projection_version) with its
--     semantic definition digest (or 'unknown'), state active | shadow | frozen | retired and
--     the live shadow build's id and token; one active version per projection (partial unique
--     index); identity immutable, append-only history in outbox.projection_version_history
--     (triggers/projection_versions__guarded.sql);
--   * outbox.projection_builds (a shadow build: state building | abandoned, token, started_at,
--     cursor) and outbox.projection_build_sources (the per-build ledger of handed-out sources,
--     append-only);
--   * outbox.register_projection_version (outbox_registrar), outbox.start_shadow_build and
--     outbox.claim_rebuild_sources (new role outbox_projector);
--   * inbox.record_receipt and inbox.observe_revision gain a trailing p_build_token uuid
--     DEFAULT NULL and check the version (old signatures dropped, every existing caller keeps
--     working: the new argument is optional, and active versions take no token);
--   * outbox.event_source gains a trailing created_at column (the rebuild order), and
--     outbox.archived_events a BRIN index on created_at (the rebuild's range scan);
--   * every projection version the active delivery set's members target now is registered as
--     active with semantic digest 'unknown' (several versions of one projection: the highest
--     active, the others frozen), and a later activation registers the targets of projections
--     that have no version yet (triggers/delivery_set_versions__register_projections.sql).
-- Applied to a running database: new tables, functions and triggers; the two inbox functions
-- are dropped and recreated in this transaction (a consumer call waits for the migration's
-- commit, none fails); CREATE INDEX on outbox.archived_events holds a SHARE lock on it while it
-- builds (archive runs wait); the view is replaced in place (its grants stay).
{{ template "roles/create_group_role.sql" "outbox_projector" }}

SET LOCAL ROLE outbox_owner;

GRANT USAGE ON SCHEMA outbox TO outbox_projector;

CREATE TABLE outbox.projection_versions (
    projection_name            text NOT NULL CHECK (projection_name ~ '^[a-z0-9][a-z0-9._@-]*$' AND length(projection_name) <= 200),
    projection_version         integer NOT NULL CHECK (projection_version > 0),
    semantic_definition_sha256 text NOT NULL CHECK (semantic_definition_sha256 ~ '^[0-9a-f]{64}$' OR semantic_definition_sha256 = 'unknown'),
    state                      text NOT NULL CHECK (state IN ('active', 'shadow', 'frozen', 'retired')),
    live_build_id              uuid,
    live_build_token           uuid,
    registered_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection_name, projection_version),
    CHECK ((live_build_id IS NULL) = (live_build_token IS NULL)),
    CHECK (live_build_token IS NULL OR state = 'shadow')
);
-- exactly one active version per projection (SPEC §11b)
CREATE UNIQUE INDEX projection_versions_one_active ON outbox.projection_versions (projection_name) WHERE state = 'active';
COMMENT ON TABLE outbox.projection_versions IS
    'Projection versions (SPEC R-PV-1): semantic digest, state active|shadow|frozen|retired, the live shadow build and its token; changed only by the outbox projection functions.';

CREATE TABLE outbox.projection_version_history (
    history_id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    state              text NOT NULL,
    changed_at         timestamptz NOT NULL DEFAULT now(),
    changed_by         text NOT NULL,
    FOREIGN KEY (projection_name, projection_version) REFERENCES outbox.projection_versions
);
COMMENT ON TABLE outbox.projection_version_history IS
    'Append-only: one row per registration and state change of a projection version (SPEC R-PV-1), written by a trigger.';

CREATE TABLE outbox.projection_builds (
    build_id           uuid PRIMARY KEY,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    build_token        uuid NOT NULL,
    state              text NOT NULL CHECK (state IN ('building', 'abandoned')),
    started_at         timestamptz NOT NULL DEFAULT now(),
    started_by         text NOT NULL,
    ended_at           timestamptz,
    cursor_at          timestamptz,
    sources_claimed    bigint NOT NULL DEFAULT 0 CHECK (sources_claimed >= 0),
    FOREIGN KEY (projection_name, projection_version) REFERENCES outbox.projection_versions,
    CHECK ((state = 'building') = (ended_at IS NULL))
);
-- one live build per version
CREATE UNIQUE INDEX projection_builds_one_live ON outbox.projection_builds (projection_name, projection_version) WHERE state = 'building';
COMMENT ON TABLE outbox.projection_builds IS
    'Shadow builds of projection versions (SPEC R-PV-1): state building|abandoned, fencing token, source cursor; changed only by start_shadow_build/claim_rebuild_sources.';

CREATE TABLE outbox.projection_build_sources (
    build_id    uuid NOT NULL REFERENCES outbox.projection_builds (build_id),
    source_kind text NOT NULL CHECK (source_kind IN ('event', 'observation')),
    source_id   uuid NOT NULL,
    source_at   timestamptz NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (build_id, source_kind, source_id)
);
COMMENT ON TABLE outbox.projection_build_sources IS
    'Append-only ledger of the sources claim_rebuild_sources handed to a build, once each (SPEC R-PV-1).';

{{ template "triggers/projection_versions__guarded.sql" . }}
{{ template "triggers/delivery_set_versions__register_projections.sql" . }}

-- The rebuild's order key for events: their append time, as a trailing column of the view
-- (CREATE OR REPLACE keeps the existing columns and grants).
CREATE OR REPLACE VIEW outbox.event_source AS
SELECT e.event_id, e.event_type, e.schema_version, e.delivery_set_version,
       e.delivery_set_definition_schema_version AS definition_schema_version,
       e.delivery_set_definition_digest_algorithm_version AS digest_algorithm_version,
       e.delivery_set_definition_digest AS definition_digest,
       -- the envelope as outbox._event_envelope builds it (a view calls functions with the
       -- reader's rights, and that helper is private)
       pg_catalog.jsonb_build_object(
           'eventId', e.event_id::text, 'eventType', e.event_type, 'eventSchemaVersion', e.schema_version,
           'aggregateId', e.aggregate_id, 'aggregateRevision', e.aggregate_revision,
           'tenant', pg_catalog.jsonb_build_object('tenantKind', e.tenant_kind, 'tenantId', e.tenant_id,
                                                   'workspaceId', e.workspace_id)
                     || CASE WHEN e.project_id IS NULL THEN '{}'::jsonb
                             ELSE pg_catalog.jsonb_build_object('projectId', e.project_id) END,
           'occurredAt', pg_catalog.to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'payload', e.event_payload)
       || CASE WHEN e.correlation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('correlationId', e.correlation_id) END
       || CASE WHEN e.causation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('causationId', e.causation_id) END
       || CASE WHEN e.operation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('operationId', e.operation_id) END
           AS envelope,
       e.event_envelope_sha256, 'hot'::text AS location, e.created_at
  FROM outbox.outbox_events e
UNION ALL
SELECT a.event_id, a.event_type, a.schema_version, a.delivery_set_version,
       a.delivery_set_definition_schema_version, a.delivery_set_definition_digest_algorithm_version,
       a.delivery_set_definition_digest, a.event_envelope_canonical::jsonb, a.event_envelope_sha256, 'archive'::text,
       a.created_at
  FROM outbox.archived_events a;
COMMENT ON VIEW outbox.event_source IS
    'Every event, hot or archived, with its frozen quartet, envelope, digest and append time; location hot|archive (SPEC R-RT-1, R-PV-1, §13). Read-only.';
CREATE INDEX archived_events_created_brin ON outbox.archived_events USING brin (created_at);

-- R-PV-1: the versions the active delivery set targets when this is installed are active (their
-- semantic definition was never recorded: 'unknown'). No active set: nothing is registered.
INSERT INTO outbox.projection_versions (projection_name, projection_version, semantic_definition_sha256, state)
SELECT t.projection_name, t.projection_version, 'unknown',
       CASE WHEN t.projection_version = max(t.projection_version) OVER (PARTITION BY t.projection_name)
            THEN 'active' ELSE 'frozen' END
  FROM (SELECT DISTINCT m.projection_name, m.projection_version
          FROM outbox.delivery_set_versions AS v
          JOIN outbox.delivery_set_members AS m
            ON m.delivery_set_version = v.delivery_set_version
           AND m.definition_schema_version = v.definition_schema_version
           AND m.digest_algorithm_version = v.digest_algorithm_version
           AND m.definition_digest = v.definition_digest
         WHERE v.status = 'active' AND m.projection_state = 'required') AS t
 ORDER BY t.projection_name, t.projection_version;

{{ template "functions/register_projection_version.sql" . }}
{{ template "functions/start_shadow_build.sql" . }}
{{ template "functions/claim_rebuild_sources.sql" . }}
{{ template "functions/_inbox_check_version.sql" . }}

-- The inbox functions gain the optional build token (docs/migrations.md rule 4: the files render
-- the new signature only with this data).
DROP FUNCTION inbox.record_receipt(text, text, integer, json, json, text);
{{ template "functions/record_receipt.sql" (dict "build_token" true) }}
DROP FUNCTION inbox.observe_revision(text, text, integer, text, bigint);
{{ template "functions/observe_revision.sql" (dict "build_token" true) }}

RESET ROLE;
