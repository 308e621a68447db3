-- Operations read model with completeness proofs (issue 14; SPEC §11 R-OP-1..4, §13 read-model
-- rows, OB501; ADR-030):
--   * inbox.projection_exact_ids / inbox.projection_run_summaries: the projector's
--     exact-identifier index and run summary, written by inbox.record_projection_ids inside the
--     projector's own transaction (R-OP-1), read by outbox.search_exact_id (R-OP-3);
--   * outbox.completeness_manifests: immutable, content-addressed CompletenessProofManifest@1
--     documents (R-OP-2), written only by outbox.take_completeness_snapshot (OB202 otherwise);
--   * outbox.take_completeness_snapshot / check_completeness / read_manifest / search_exact_id,
--     role outbox_auditor only (the dispatcher may not call them).
-- Applied to a running database: new tables and functions only; no lock on the hot tables.
SET LOCAL ROLE outbox_owner;

-- R-OP-1: exact identifier -> event (and the operation it links to, NULL while a wallet-first
-- reservation waits for its run). One row per (projection, kind, value, event).
CREATE TABLE inbox.projection_exact_ids (
    consumer_name      text NOT NULL,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    id_kind            text NOT NULL CHECK (id_kind IN ('eventId', 'operationId', 'correlationId', 'runId', 'reservationId', 'causationId')),
    id_value           text NOT NULL CHECK (length(id_value) BETWEEN 1 AND 200),
    event_id           uuid NOT NULL,
    operation_id       text,
    recorded_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, projection_name, projection_version, id_kind, id_value, event_id)
);
CREATE INDEX projection_exact_ids_lookup ON inbox.projection_exact_ids (id_kind, id_value);
CREATE INDEX projection_exact_ids_by_event ON inbox.projection_exact_ids (consumer_name, projection_name, projection_version, event_id);
COMMENT ON TABLE inbox.projection_exact_ids IS
    'The projector''s exact-identifier index (SPEC R-OP-1, R-OP-3): every id of an applied event -> the event and the operation it links to; written in the projector''s transaction by inbox.record_projection_ids; matched exactly (no prefix, no fuzzy match).';

CREATE TABLE inbox.projection_run_summaries (
    consumer_name      text NOT NULL,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    last_applied_at    timestamptz NOT NULL,
    last_event_id      uuid NOT NULL,
    applied_events     bigint NOT NULL CHECK (applied_events > 0),
    PRIMARY KEY (consumer_name, projection_name, projection_version)
);
COMMENT ON TABLE inbox.projection_run_summaries IS
    'Projection run summary (SPEC R-OP-1): last successful apply of each projection, updated in the applying transaction. Display only: never evidence of completeness (R-OP-2).';

REVOKE ALL ON inbox.projection_exact_ids, inbox.projection_run_summaries FROM PUBLIC;
GRANT SELECT ON inbox.projection_exact_ids, inbox.projection_run_summaries TO outbox_auditor;

-- R-OP-2: the manifests. document is the RFC 8785 canonical text of CompletenessProofManifest@1,
-- manifest_sha256 its jcs-sha256-v1; the columns beside it are metadata outside the digest.
CREATE TABLE outbox.completeness_manifests (
    manifest_id     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    manifest_sha256 text NOT NULL CHECK (manifest_sha256 ~ '^[0-9a-f]{64}$'),
    source_filter   text NOT NULL,
    status          text NOT NULL CHECK (status IN ('complete_for_supported_scope', 'partial_source_gap', 'unknown')),
    member_count    bigint NOT NULL CHECK (member_count >= 0),
    document        text NOT NULL,
    taken_at        timestamptz NOT NULL DEFAULT now(),
    taken_by        text NOT NULL DEFAULT session_user
);
CREATE INDEX completeness_manifests_latest ON outbox.completeness_manifests (source_filter, taken_at DESC);
CREATE INDEX completeness_manifests_sha ON outbox.completeness_manifests (manifest_sha256);
COMMENT ON TABLE outbox.completeness_manifests IS
    'Immutable, content-addressed completeness proofs (SPEC R-OP-2): CompletenessProofManifest@1 canonical text and its jcs-sha256-v1; UPDATE/DELETE/TRUNCATE raise OB202.';
REVOKE ALL ON outbox.completeness_manifests FROM PUBLIC;
GRANT SELECT ON outbox.completeness_manifests TO outbox_auditor;
{{ template "triggers/completeness_manifests__immutable.sql" . }}

{{ template "functions/_completeness_filter.sql" . }}
{{ template "functions/_completeness_document.sql" . }}
{{ template "functions/take_completeness_snapshot.sql" . }}
{{ template "functions/check_completeness.sql" . }}
{{ template "functions/read_manifest.sql" . }}
{{ template "functions/search_exact_id.sql" . }}
{{ template "functions/record_projection_ids.sql" . }}

RESET ROLE;
