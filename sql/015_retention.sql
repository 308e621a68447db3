-- Retention, archive and legacy bootstrap (SPEC §9 R-RT-1..4, §3.3 R-BS-1..4, §13; issue 13).
--   * role outbox_retention (EXECUTE on the retention functions only);
--   * immutable archive tables (outbox.archived_*), one immutable audit row per archive run
--     (outbox.archive_runs, skips in outbox.archive_run_skips), legal holds (outbox.legal_holds);
--   * outbox.archive_events / verify_archive_run / set_legal_hold / release_legal_hold, the
--     completeness hook outbox.archive_integrity_problems and the view outbox.event_source;
--   * the hot tables' DELETE guard moves from each table's row trigger to one statement-level
--     trigger per table that lets through only rows archive_events copied in the same
--     transaction (OB202 for everyone else); UPDATE and TRUNCATE guards are unchanged;
--   * append_events refuses an archived event id (OB105; re-included: docs/migrations.md rule 2);
--   * bootstrap of legacy events: outbox.bootstrap_legacy_events with its items and evidence
--     (outbox.bootstrap_items, outbox.bootstrap_runs, view outbox.bootstrap_quarantine).
-- Applied to a running database: new tables and functions; the trigger swap and the BRIN index
-- take short locks on the hot tables (no rewrite, no backfill).

-- Roles are cluster-wide and need CREATEROLE: created before switching to the owner.
-- outbox_retention runs the audited archive procedure and sets/releases legal holds: EXECUTE on
-- those functions only (granted in each function file) and USAGE on schema outbox.
{{ template "roles/create_group_role.sql" "outbox_retention" }}

SET LOCAL ROLE outbox_owner;

GRANT USAGE ON SCHEMA outbox TO outbox_retention;

-- R-RT-1: age of an event for retention is its created_at. BRIN: almost free on the append hot
-- path (created_at grows with insertion order), enough for the archive's "older than" scan.
CREATE INDEX outbox_events_created_brin ON outbox.outbox_events USING brin (created_at);

-- R-RT-3: one immutable audit row per archive run, written last (after the moves).
CREATE TABLE outbox.archive_runs (
    run_id                        uuid PRIMARY KEY,
    run_by                        text NOT NULL,
    started_at                    timestamptz NOT NULL,
    finished_at                   timestamptz NOT NULL,
    older_than                    interval NOT NULL,
    max_rows                      integer NOT NULL,
    cutoff                        timestamptz NOT NULL,
    archived                      integer NOT NULL CHECK (archived >= 0),
    skipped                       integer NOT NULL CHECK (skipped >= 0),
    skipped_open_delivery         integer NOT NULL,
    skipped_unresolved_quarantine integer NOT NULL,
    skipped_legal_hold            integer NOT NULL,
    skipped_digest_mismatch       integer NOT NULL,
    deliveries                    integer NOT NULL,
    attempt_starts                integer NOT NULL,
    attempt_finishes              integer NOT NULL,
    quarantine_rows               integer NOT NULL,
    oldest_created_at             timestamptz,
    newest_created_at             timestamptz,
    archived_set_sha256           text NOT NULL CHECK (archived_set_sha256 ~ '^[0-9a-f]{64}$'),
    content_sha256                text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$')
);
COMMENT ON TABLE outbox.archive_runs IS
    'One immutable audit row per outbox.archive_events run: session user, parameters, counts, the set digest of the archived (event_id, digest) pairs and a content digest (SPEC R-RT-3).';

-- Skipped events of a run, with the reason (at most max_rows per run; exact counts in the run row).
CREATE TABLE outbox.archive_run_skips (
    run_id   uuid NOT NULL,
    event_id uuid NOT NULL,
    reason   text NOT NULL CHECK (reason IN ('open_delivery', 'unresolved_quarantine', 'legal_hold', 'digest_mismatch')),
    detail   text,
    PRIMARY KEY (run_id, event_id)
);

-- R-RT-1: the archived events keep every column of the hot row (same names), the canonical
-- envelope text and the publication time. The run row is written last in the same
-- transaction: the foreign key is checked at COMMIT.
CREATE TABLE outbox.archived_events (
    event_id                                         uuid PRIMARY KEY,
    run_id                                           uuid NOT NULL REFERENCES outbox.archive_runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    event_type                                       text NOT NULL,
    schema_version                                   text NOT NULL,
    delivery_set_version                             integer NOT NULL,
    delivery_set_definition_schema_version           integer NOT NULL,
    delivery_set_definition_digest_algorithm_version text NOT NULL,
    delivery_set_definition_digest                   text NOT NULL,
    aggregate_id                                     text NOT NULL,
    aggregate_revision                               bigint NOT NULL,
    tenant_kind                                      text NOT NULL,
    tenant_id                                        text NOT NULL,
    workspace_id                                     text NOT NULL,
    project_id                                       text,
    correlation_id                                   text,
    causation_id                                     text,
    operation_id                                     text,
    event_payload                                    jsonb NOT NULL,
    event_envelope_digest_algorithm_version          text NOT NULL,
    event_envelope_sha256                            text NOT NULL,
    occurred_at                                      timestamptz NOT NULL,
    created_at                                       timestamptz NOT NULL,
    event_envelope_canonical                         text NOT NULL,
    published_at                                     timestamptz,
    archived_at                                      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (delivery_set_version, delivery_set_definition_schema_version,
                 delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest)
        REFERENCES outbox.delivery_set_versions
);
CREATE INDEX archived_events_run ON outbox.archived_events (run_id);
COMMENT ON TABLE outbox.archived_events IS
    'Immutable archive of events moved out of outbox.outbox_events by outbox.archive_events; an archived id can never be appended again (SPEC R-RT-1).';

-- The children are kept as complete row images (jsonb of the hot row) with their keys, so the
-- archive does not depend on the hot tables' keys or on columns added to them later (several
-- quarantine rows per delivery are kept as they are: their own archive key).
CREATE TABLE outbox.archived_deliveries (
    destination text NOT NULL,
    event_id    uuid NOT NULL,
    run_id      uuid NOT NULL,
    status      text NOT NULL,
    row_image   jsonb NOT NULL,
    PRIMARY KEY (destination, event_id)
);
CREATE INDEX archived_deliveries_run ON outbox.archived_deliveries (run_id);
CREATE INDEX archived_deliveries_event ON outbox.archived_deliveries (event_id);
CREATE TABLE outbox.archived_attempt_starts (
    attempt_id  uuid PRIMARY KEY,
    run_id      uuid NOT NULL,
    destination text NOT NULL,
    event_id    uuid NOT NULL,
    row_image   jsonb NOT NULL
);
CREATE INDEX archived_attempt_starts_run ON outbox.archived_attempt_starts (run_id);
CREATE TABLE outbox.archived_attempt_finishes (
    attempt_id uuid PRIMARY KEY,
    run_id     uuid NOT NULL,
    event_id   uuid NOT NULL,
    row_image  jsonb NOT NULL
);
CREATE INDEX archived_attempt_finishes_run ON outbox.archived_attempt_finishes (run_id);
CREATE TABLE outbox.archived_quarantine (
    archive_row_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id         uuid NOT NULL,
    destination    text NOT NULL,
    event_id       uuid NOT NULL,
    row_image      jsonb NOT NULL
);
CREATE INDEX archived_quarantine_run ON outbox.archived_quarantine (run_id);
CREATE INDEX archived_quarantine_event ON outbox.archived_quarantine (event_id);

-- R-RT-1, R-RT-4: legal holds; a row is released once and never deleted (its own audit).
CREATE TABLE outbox.legal_holds (
    hold_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    uuid NOT NULL,
    reason      text NOT NULL CHECK (reason <> '' AND length(reason) <= 500),
    set_by      text NOT NULL,
    set_at      timestamptz NOT NULL DEFAULT now(),
    released_by text,
    released_at timestamptz,
    CHECK ((released_at IS NULL) = (released_by IS NULL))
);
CREATE UNIQUE INDEX legal_holds_active ON outbox.legal_holds (event_id) WHERE released_at IS NULL;
COMMENT ON TABLE outbox.legal_holds IS
    'Legal holds (SPEC R-RT-1): an event with an active hold (released_at IS NULL) is never archived. Set/released by outbox_retention; rows are never deleted.';

-- R-BS-2..4: bootstrap items (one per legacy row key, never changed: resumable, idempotent) and
-- one immutable evidence row per run.
CREATE TABLE outbox.bootstrap_runs (
    run_id                    uuid PRIMARY KEY,
    source                    text NOT NULL,
    delivery_set_version      integer NOT NULL,
    definition_schema_version integer NOT NULL,
    digest_algorithm_version  text NOT NULL,
    definition_digest         text NOT NULL,
    max_rows                  integer NOT NULL,
    run_by                    text NOT NULL,
    started_at                timestamptz NOT NULL,
    finished_at               timestamptz NOT NULL,
    imported                  integer NOT NULL,
    already_present           integer NOT NULL,
    quarantined               integer NOT NULL,
    quarantine_reasons        jsonb NOT NULL,
    present_before            integer NOT NULL,
    rows_left                 integer NOT NULL,
    evidence_sha256           text NOT NULL CHECK (evidence_sha256 ~ '^[0-9a-f]{64}$'),
    FOREIGN KEY (delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest)
        REFERENCES outbox.delivery_set_versions
);
COMMENT ON TABLE outbox.bootstrap_runs IS
    'One immutable evidence row per outbox.bootstrap_legacy_events run: counts per classification and reason, rows left, evidence set digest (SPEC R-BS-2, R-BS-4).';
CREATE TABLE outbox.bootstrap_items (
    source                text NOT NULL,
    item_key              text NOT NULL,
    run_id                uuid NOT NULL REFERENCES outbox.bootstrap_runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    event_id              uuid,
    classification        text NOT NULL CHECK (classification IN ('imported', 'already_present', 'quarantined')),
    reason                text CHECK (reason IN ('unsupported_schema', 'corrupt_envelope', 'corrupt_payload',
                                                 'not_canonicalizable', 'digest_conflict')),
    detail                text,
    event_envelope_sha256 text,
    delivery_set_version  integer NOT NULL,
    legacy_row            jsonb,
    recorded_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, item_key),
    CHECK ((classification = 'quarantined') = (reason IS NOT NULL)),
    CHECK ((classification = 'quarantined') = (event_envelope_sha256 IS NULL)),
    CHECK ((classification = 'quarantined') = (legacy_row IS NOT NULL))
);
CREATE INDEX bootstrap_items_run ON outbox.bootstrap_items (run_id);

-- The hot tables' DELETE guard (R-RT-1, R-RT-4): the row triggers keep UPDATE (and the truncate
-- triggers TRUNCATE); DELETE is guarded by tg_outbox_hot__retention_delete below.
DROP TRIGGER tg_outbox_events__immutable ON outbox.outbox_events;
CREATE TRIGGER tg_outbox_events__immutable BEFORE UPDATE ON outbox.outbox_events
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_events__immutable();
DROP TRIGGER tg_outbox_deliveries__no_delete ON outbox.outbox_deliveries;
DROP TRIGGER tg_outbox_delivery_attempt_starts__append_only ON outbox.outbox_delivery_attempt_starts;
CREATE TRIGGER tg_outbox_delivery_attempt_starts__append_only BEFORE UPDATE ON outbox.outbox_delivery_attempt_starts
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only();
DROP TRIGGER tg_outbox_delivery_attempt_finishes__append_only ON outbox.outbox_delivery_attempt_finishes;
CREATE TRIGGER tg_outbox_delivery_attempt_finishes__append_only BEFORE UPDATE ON outbox.outbox_delivery_attempt_finishes
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_finishes__append_only();
DROP TRIGGER tg_outbox_quarantine__append_only ON outbox.outbox_quarantine;
CREATE TRIGGER tg_outbox_quarantine__append_only BEFORE UPDATE ON outbox.outbox_quarantine
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();
DROP TRIGGER tg_outbox_publications__guarded ON outbox.outbox_publications;
CREATE TRIGGER tg_outbox_publications__guarded BEFORE UPDATE ON outbox.outbox_publications
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
{{ template "triggers/outbox_hot__retention_delete.sql" . }}
{{ template "triggers/outbox_archive__immutable.sql" . }}
{{ template "triggers/outbox_legal_holds__release_only.sql" . }}

-- Private helpers (granted to nobody).
{{ template "functions/_archive_digest_problem.sql" . }}
{{ template "functions/_archive_run_digests.sql" . }}
{{ template "functions/_bootstrap_envelope.sql" . }}

-- Public API (SPEC §13), grants in each file.
{{ template "functions/archive_events.sql" . }}
{{ template "functions/verify_archive_run.sql" . }}
{{ template "functions/archive_integrity_problems.sql" . }}
{{ template "functions/set_legal_hold.sql" . }}
{{ template "functions/release_legal_hold.sql" . }}
{{ template "functions/bootstrap_legacy_events.sql" . }}

-- append_events' body changed (an archived id is refused): re-created from its file (rule 2).
DROP FUNCTION outbox.append_events(json, text[], text[]);
{{ template "functions/append_events.sql" . }}

-- R-RT-1: one logical source, hot and archived, for auditors and the read model.
CREATE VIEW outbox.event_source AS
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
       e.event_envelope_sha256, 'hot'::text AS location
  FROM outbox.outbox_events e
UNION ALL
SELECT a.event_id, a.event_type, a.schema_version, a.delivery_set_version,
       a.delivery_set_definition_schema_version, a.delivery_set_definition_digest_algorithm_version,
       a.delivery_set_definition_digest, a.event_envelope_canonical::jsonb, a.event_envelope_sha256, 'archive'::text
  FROM outbox.archived_events a;
COMMENT ON VIEW outbox.event_source IS
    'Every event, hot or archived, with its frozen quartet, envelope and digest; location hot|archive (SPEC R-RT-1, §13). Read-only.';

-- R-BS-3: the visible bootstrap quarantine.
CREATE VIEW outbox.bootstrap_quarantine AS
SELECT i.source, i.item_key, i.event_id, i.reason, i.detail, i.legacy_row, i.run_id, i.recorded_at
  FROM outbox.bootstrap_items i
 WHERE i.classification = 'quarantined';
COMMENT ON VIEW outbox.bootstrap_quarantine IS
    'Legacy rows the bootstrap could not import, with their reason and the row as it was (SPEC R-BS-3). Read-only.';

-- Grants (SPEC R-SEC-1): nobody but the owner writes these tables; the auditor reads them;
-- outbox_retention has USAGE and EXECUTE on its functions only (granted in the files).
REVOKE ALL ON outbox.archive_runs, outbox.archive_run_skips, outbox.archived_events, outbox.archived_deliveries,
              outbox.archived_attempt_starts, outbox.archived_attempt_finishes, outbox.archived_quarantine,
              outbox.legal_holds, outbox.bootstrap_runs, outbox.bootstrap_items,
              outbox.event_source, outbox.bootstrap_quarantine FROM PUBLIC;
GRANT SELECT ON outbox.archive_runs, outbox.archive_run_skips, outbox.archived_events, outbox.archived_deliveries,
                outbox.archived_attempt_starts, outbox.archived_attempt_finishes, outbox.archived_quarantine,
                outbox.legal_holds, outbox.bootstrap_runs, outbox.bootstrap_items,
                outbox.event_source, outbox.bootstrap_quarantine
    TO outbox_auditor;

RESET ROLE;
