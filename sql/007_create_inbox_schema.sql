-- Consumer-side inbox: receipts and per-aggregate revision progress (SPEC §6, R-CO-1..3, §13).
-- Migrated into every database next to `outbox` (a database may be producer and consumer at
-- once); each consumer database is migrated with the same migrations.
--
-- Projection convention: consumers that build no projection use projection_name = '' and
-- projection_version = 0 (never NULL) in every key below, so one primary key serves both kinds
-- (SPEC R-CO-1). A projection consumer uses a non-empty name and a version > 0.
--
-- Access: outbox_consumer holds EXECUTE on inbox.record_receipt, inbox.observe_revision and
-- inbox.read_receipt (SECURITY DEFINER) and no privilege on any inbox table; outbox_auditor may
-- SELECT the tables. The consumer's own domain tables live elsewhere, granted to its login role.
SET LOCAL ROLE outbox_owner;

CREATE SCHEMA inbox AUTHORIZATION outbox_owner;
REVOKE ALL ON SCHEMA inbox FROM PUBLIC;
COMMENT ON SCHEMA inbox IS 'pgoutbox consumer inbox: content-addressed receipts, revision progress and gaps (SPEC §6)';

-- Receipts (R-CO-1): append-only, content-addressed, one per (consumer, projection, event).
-- receipt_document is the canonical (RFC 8785) text of the complete receipt document, with its
-- ref and digest; receipt_digest is jcs-sha256-v1 of the document minus <prefix>Ref,
-- <prefix>Digest and the time field. event_envelope_sha256 is computed by the database from
-- the envelope the consumer applied, never taken from the caller.
CREATE TABLE inbox.inbox_receipts (
    consumer_name                           text NOT NULL CHECK (consumer_name ~ '^[a-z0-9][a-z0-9._@-]*$'),
    projection_name                         text NOT NULL CHECK (projection_name = '' OR projection_name ~ '^[a-z0-9][a-z0-9._@-]*$'),
    projection_version                      integer NOT NULL CHECK (projection_version >= 0),
    event_id                                uuid NOT NULL,
    destination                             text NOT NULL CHECK (destination ~ '^[a-z0-9][a-z0-9._@-]*$'),
    receipt_kind                            text NOT NULL REFERENCES outbox.receipt_kinds (receipt_kind),
    receipt_type                            text NOT NULL,
    receipt_schema_version                  integer NOT NULL CHECK (receipt_schema_version > 0),
    receipt_ref                             text NOT NULL CHECK (receipt_ref <> '' AND pg_catalog.length(receipt_ref) <= 200),
    receipt_digest_algorithm_version        text NOT NULL CHECK (receipt_digest_algorithm_version = 'jcs-sha256-v1'),
    receipt_digest                          text NOT NULL CHECK (receipt_digest ~ '^[0-9a-f]{64}$'),
    receipt_document                        text NOT NULL,
    event_type                              text NOT NULL,
    event_schema_version                    text NOT NULL,
    aggregate_id                            text NOT NULL,
    aggregate_revision                      bigint NOT NULL CHECK (aggregate_revision > 0),
    event_envelope_digest_algorithm_version text NOT NULL CHECK (event_envelope_digest_algorithm_version = 'jcs-sha256-v1'),
    event_envelope_sha256                   text NOT NULL CHECK (event_envelope_sha256 ~ '^[0-9a-f]{64}$'),
    receipt_time                            timestamptz NOT NULL,
    recorded_at                             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, projection_name, projection_version, event_id),
    UNIQUE (consumer_name, receipt_ref),
    CHECK ((projection_name = '') = (projection_version = 0))
);
COMMENT ON TABLE inbox.inbox_receipts IS
    'Append-only content-addressed consumer receipts, unique per (consumer_name, projection_name, projection_version, event_id); projection fields are ''''/0 for non-projection consumers (SPEC R-CO-1).';
CREATE INDEX inbox_receipts_by_event ON inbox.inbox_receipts (event_id);

-- Per-aggregate revision progress (R-CO-3): the highest revision applied, contiguous from 1.
CREATE TABLE inbox.inbox_revision_progress (
    consumer_name      text NOT NULL,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    aggregate_id       text NOT NULL CHECK (aggregate_id <> ''),
    last_revision      bigint NOT NULL CHECK (last_revision > 0),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, projection_name, projection_version, aggregate_id),
    CHECK ((projection_name = '') = (projection_version = 0))
);
COMMENT ON TABLE inbox.inbox_revision_progress IS
    'Highest contiguously applied aggregate revision per (consumer, projection, aggregate); only increases (SPEC R-CO-3).';

-- Revision gaps (R-CO-3): a revision beyond progress+1 was seen. One row per missing revision
-- (expected_revision = progress+1 at the time); closed, never deleted, when that revision applies.
CREATE TABLE inbox.inbox_revision_gaps (
    consumer_name      text NOT NULL,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    aggregate_id       text NOT NULL CHECK (aggregate_id <> ''),
    expected_revision  bigint NOT NULL CHECK (expected_revision > 0),
    seen_revision      bigint NOT NULL,
    first_seen_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at       timestamptz NOT NULL DEFAULT now(),
    observation_count  integer NOT NULL DEFAULT 1 CHECK (observation_count > 0),
    closed_at          timestamptz,
    closed_by_revision bigint,
    PRIMARY KEY (consumer_name, projection_name, projection_version, aggregate_id, expected_revision),
    CHECK (seen_revision > expected_revision),
    CHECK ((closed_at IS NULL) = (closed_by_revision IS NULL)),
    CHECK (closed_by_revision IS NULL OR closed_by_revision >= expected_revision)
);
COMMENT ON TABLE inbox.inbox_revision_gaps IS
    'Recorded revision gaps: expected (missing) revision, highest revision seen beyond it, first/last seen; closed when the missing revision applies (SPEC R-CO-3).';
CREATE INDEX inbox_revision_gaps_open ON inbox.inbox_revision_gaps
    (consumer_name, projection_name, projection_version, aggregate_id) WHERE closed_at IS NULL;

-- Private helpers (granted to nobody).
{{ template "functions/_inbox_check_key.sql" . }}
{{ template "functions/_inbox_receipt_kind.sql" . }}
{{ template "functions/_inbox_default_ref.sql" . }}

-- Public inbox API (SPEC §13), granted to outbox_consumer in each file.
{{ template "functions/record_receipt.sql" . }}
{{ template "functions/read_receipt.sql" . }}
{{ template "functions/observe_revision.sql" . }}

-- Append-only receipts, monotonic progress, closed gaps immutable (SPEC R-SEC-3).
{{ template "triggers/inbox_receipts__append_only.sql" . }}
{{ template "triggers/inbox_revision_progress__monotonic.sql" . }}
{{ template "triggers/inbox_revision_gaps__closed_immutable.sql" . }}

-- Grants (SPEC R-SEC-1): the consumer reaches the schema only for its functions; the auditor reads.
GRANT USAGE ON SCHEMA inbox TO outbox_consumer, outbox_auditor;
GRANT SELECT ON inbox.inbox_receipts, inbox.inbox_revision_progress, inbox.inbox_revision_gaps TO outbox_auditor;

RESET ROLE;
