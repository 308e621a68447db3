-- Domain schema of the reference operations_projector (projection operations_timeline v1).
-- __schema__ is replaced by the schema name (refconsumer_operations unless configured otherwise).
-- An operation is created only by run.created@2.0; wallet.reserved@2.0 for an operation whose
-- run is not projected yet waits in pending_unlinked_reservations (no fake operation, SPEC
-- R-OP-1) and is linked when the run arrives; billing boundaries append timeline entries.
CREATE SCHEMA IF NOT EXISTS __schema__;

CREATE TABLE IF NOT EXISTS __schema__.operations (
    operation_id     text PRIMARY KEY,
    run_id           text NOT NULL,
    correlation_id   text NOT NULL,
    tenant_id        text NOT NULL,
    workspace_id     text NOT NULL,
    created_event_id uuid NOT NULL UNIQUE,
    reservation_id   text,
    occurred_at      timestamptz NOT NULL,
    projected_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS __schema__.operation_timeline (
    event_id             uuid PRIMARY KEY,
    operation_id         text NOT NULL,
    entry_kind           text NOT NULL CHECK (entry_kind IN ('run_created', 'wallet_reserved', 'billing_boundary')),
    event_type           text NOT NULL,
    event_schema_version text NOT NULL,
    aggregate_id         text NOT NULL,
    aggregate_revision   bigint NOT NULL,
    occurred_at          timestamptz NOT NULL,
    projected_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS operation_timeline_by_operation ON __schema__.operation_timeline (operation_id, occurred_at);

CREATE TABLE IF NOT EXISTS __schema__.pending_unlinked_reservations (
    event_id           uuid PRIMARY KEY,
    operation_id       text NOT NULL,
    correlation_id     text NOT NULL,
    reservation_id     text NOT NULL,
    aggregate_revision bigint NOT NULL,
    occurred_at        timestamptz NOT NULL,
    received_at        timestamptz NOT NULL DEFAULT now(),
    linked_at          timestamptz,
    linked_run_id      text
);
CREATE INDEX IF NOT EXISTS pending_unlinked_open ON __schema__.pending_unlinked_reservations (operation_id) WHERE linked_at IS NULL;

-- Linking evidence (R-OP-1): a wallet-first reservation links to its run only when its
-- causationId is the run event's id and its tenant equals the run's (not only shared ids).
ALTER TABLE __schema__.operations ADD COLUMN IF NOT EXISTS tenant_kind text;
ALTER TABLE __schema__.pending_unlinked_reservations ADD COLUMN IF NOT EXISTS causation_id text;
ALTER TABLE __schema__.pending_unlinked_reservations ADD COLUMN IF NOT EXISTS tenant_kind text;
ALTER TABLE __schema__.pending_unlinked_reservations ADD COLUMN IF NOT EXISTS tenant_id text;
ALTER TABLE __schema__.pending_unlinked_reservations ADD COLUMN IF NOT EXISTS workspace_id text;

-- One row per applied event; applied_count > 1 would be a double effect (tests assert 1).
CREATE TABLE IF NOT EXISTS __schema__.effects (
    event_id      uuid PRIMARY KEY,
    event_type    text NOT NULL,
    applied_count integer NOT NULL
);

-- One lock row per operation id (not an operation: only a key to serialize on). run.created and
-- wallet.reserved of one operation take it first, so a reservation delivered at the same moment
-- as its run cannot miss it in both directions (each would otherwise not see the other's
-- uncommitted row and the reservation would wait unlinked forever). Row lock, never an
-- advisory key (R-SEC-5).
CREATE TABLE IF NOT EXISTS __schema__.operation_locks (
    operation_id text PRIMARY KEY
);

-- The projection's content rows for outbox.projection_digest (SPEC R-PV-4): every projected row
-- with a key, without apply times (projected_at, received_at) and without the double-effect
-- counters; a wallet-first reservation's pending row counts only while it is unlinked (once
-- linked, the operation holds the reservation, as when the run arrived first), so two builds of
-- the same sources in any arrival order have one digest.
-- Register it per version: outbox.register_projection_rows('operations_timeline', V,
-- '<schema>.projection_rows'), after GRANT SELECT ON it TO outbox_owner.
CREATE OR REPLACE VIEW __schema__.projection_rows AS
SELECT 'operation:' || o.operation_id AS row_key, pg_catalog.to_jsonb(o) - 'projected_at' AS row_document
  FROM __schema__.operations AS o
UNION ALL
SELECT 'timeline:' || t.event_id::text, pg_catalog.to_jsonb(t) - 'projected_at'
  FROM __schema__.operation_timeline AS t
UNION ALL
SELECT 'pending:' || p.event_id::text, pg_catalog.to_jsonb(p) - 'received_at' - 'linked_at' - 'linked_run_id'
  FROM __schema__.pending_unlinked_reservations AS p
 WHERE p.linked_at IS NULL;
