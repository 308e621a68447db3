-- The kernel's producer-side data model (SPEC §2). Objects are owned by outbox_owner; nothing is
-- granted to PUBLIC. Grants for the other roles are set by the install migrations of each area.
SET LOCAL ROLE outbox_owner;

CREATE SCHEMA outbox AUTHORIZATION outbox_owner;
REVOKE ALL ON SCHEMA outbox FROM PUBLIC;
COMMENT ON SCHEMA outbox IS 'pgoutbox kernel: delivery-set registry, events, deliveries, attempts, quarantine';

-- Closed list of normalized error codes (SPEC R-AK-7). Retryable codes move a delivery back to
-- pending; non-retryable codes are the only valid quarantine reasons.
CREATE TABLE outbox.error_codes (
    code        text PRIMARY KEY CHECK (code ~ '^[a-z][a-z0-9_]*$'),
    retryable   boolean NOT NULL,
    description text NOT NULL
);

-- Receipt kinds known to the kernel (SPEC R-AK-1, R-AK-1a): the closed union of the
-- ActiveConsumerAck@1 appliedReceipt, with the field prefix of each receipt document.
CREATE TABLE outbox.receipt_kinds (
    receipt_kind           text PRIMARY KEY CHECK (receipt_kind ~ '^[a-z0-9][a-z0-9._@-]*$'),
    receipt_type           text NOT NULL UNIQUE,
    field_prefix           text NOT NULL UNIQUE CHECK (field_prefix ~ '^[a-z][A-Za-z0-9]*$'),
    time_field             text NOT NULL CHECK (time_field ~ '^[a-z][A-Za-z0-9]*$'),
    receipt_schema_version integer NOT NULL CHECK (receipt_schema_version > 0)
);

-- Canonical destination registry (SPEC §2, §3.4). A destination maps to exactly one consumer.
CREATE TABLE outbox.delivery_destinations (
    destination            text PRIMARY KEY CHECK (destination ~ '^[a-z0-9][a-z0-9._@-]*$'),
    consumer_name          text NOT NULL CHECK (consumer_name ~ '^[a-z0-9][a-z0-9._@-]*$'),
    receipt_kind           text NOT NULL REFERENCES outbox.receipt_kinds (receipt_kind),
    receipt_type           text NOT NULL,
    receipt_schema_version integer NOT NULL CHECK (receipt_schema_version > 0),
    projection_required    boolean NOT NULL,
    ordering               text NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'per_aggregate')),
    registered_at          timestamptz NOT NULL DEFAULT now()
);

-- Delivery-set definitions (SPEC §3.1). The quartet is the identity; status, activated_at and
-- source_release are registry metadata outside the digest.
CREATE TABLE outbox.delivery_set_versions (
    delivery_set_version      integer NOT NULL CHECK (delivery_set_version > 0),
    definition_schema_version integer NOT NULL CHECK (definition_schema_version = 1),
    digest_algorithm_version  text NOT NULL CHECK (digest_algorithm_version = 'jcs-sha256-v1'),
    definition_digest         text NOT NULL CHECK (definition_digest ~ '^[0-9a-f]{64}$'),
    definition                text NOT NULL,
    status                    text NOT NULL DEFAULT 'registered' CHECK (status IN ('registered', 'active', 'retired')),
    activated_at              timestamptz,
    source_release            text NOT NULL,
    registered_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest),
    UNIQUE (delivery_set_version)
);
-- Exactly one active version per database (R-DS-5).
CREATE UNIQUE INDEX delivery_set_versions_one_active ON outbox.delivery_set_versions ((true)) WHERE status = 'active';

CREATE TABLE outbox.delivery_set_applicable_events (
    delivery_set_version      integer NOT NULL,
    definition_schema_version integer NOT NULL,
    digest_algorithm_version  text NOT NULL,
    definition_digest         text NOT NULL,
    event_type                text NOT NULL,
    event_schema_version      text NOT NULL,
    PRIMARY KEY (delivery_set_version, event_type, event_schema_version),
    FOREIGN KEY (delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest)
        REFERENCES outbox.delivery_set_versions
);

CREATE TABLE outbox.delivery_set_members (
    delivery_set_version            integer NOT NULL,
    definition_schema_version       integer NOT NULL,
    digest_algorithm_version        text NOT NULL,
    definition_digest               text NOT NULL,
    event_type                      text NOT NULL,
    event_schema_version            text NOT NULL,
    destination                     text NOT NULL REFERENCES outbox.delivery_destinations (destination),
    consumer_name                   text NOT NULL,
    expected_receipt_type           text NOT NULL,
    expected_receipt_schema_version integer NOT NULL,
    projection_state                text NOT NULL CHECK (projection_state IN ('not_applicable', 'required')),
    projection_name                 text,
    projection_version              integer,
    mandatory                       boolean NOT NULL,
    PRIMARY KEY (delivery_set_version, event_type, event_schema_version, destination),
    FOREIGN KEY (delivery_set_version, event_type, event_schema_version)
        REFERENCES outbox.delivery_set_applicable_events (delivery_set_version, event_type, event_schema_version),
    CHECK ((projection_state = 'required') = (projection_name IS NOT NULL AND projection_version IS NOT NULL)),
    CHECK (projection_state = 'required' OR (projection_name IS NULL AND projection_version IS NULL))
);

-- Immutable events (SPEC §2). event_id is the identity.
CREATE TABLE outbox.outbox_events (
    event_id                                         uuid PRIMARY KEY,
    event_type                                       text NOT NULL,
    schema_version                                   text NOT NULL,
    delivery_set_version                             integer NOT NULL,
    delivery_set_definition_schema_version           integer NOT NULL,
    delivery_set_definition_digest_algorithm_version text NOT NULL,
    delivery_set_definition_digest                   text NOT NULL,
    aggregate_id                                     text NOT NULL,
    aggregate_revision                               bigint NOT NULL CHECK (aggregate_revision > 0),
    tenant_kind                                      text NOT NULL,
    tenant_id                                        text NOT NULL,
    workspace_id                                     text NOT NULL,
    project_id                                       text,
    correlation_id                                   text,
    causation_id                                     text,
    operation_id                                     text,
    event_payload                                    jsonb NOT NULL,
    event_envelope_digest_algorithm_version          text NOT NULL CHECK (event_envelope_digest_algorithm_version = 'jcs-sha256-v1'),
    event_envelope_sha256                            text NOT NULL CHECK (event_envelope_sha256 ~ '^[0-9a-f]{64}$'),
    occurred_at                                      timestamptz NOT NULL,
    created_at                                       timestamptz NOT NULL DEFAULT now(),
    published_at                                     timestamptz,
    FOREIGN KEY (delivery_set_version, delivery_set_definition_schema_version,
                 delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest)
        REFERENCES outbox.delivery_set_versions
);
CREATE INDEX outbox_events_unpublished ON outbox.outbox_events (created_at) WHERE published_at IS NULL;

-- One row per event x mandatory member (SPEC §2, R-AP-4). Frozen columns never change; the
-- lease/attempt/ack columns move only through the dispatch functions.
CREATE TABLE outbox.outbox_deliveries (
    destination                                text NOT NULL REFERENCES outbox.delivery_destinations (destination),
    event_id                                   uuid NOT NULL REFERENCES outbox.outbox_events (event_id),
    delivery_set_version                       integer NOT NULL,
    consumer_name                              text NOT NULL,
    expected_receipt_type                      text NOT NULL,
    expected_receipt_schema_version            integer NOT NULL,
    required_projection_name                   text,
    required_projection_version                integer,
    mandatory                                  boolean NOT NULL,
    aggregate_id                               text NOT NULL,
    aggregate_revision                         bigint NOT NULL,
    status                                     text NOT NULL DEFAULT 'pending'
                                               CHECK (status IN ('pending', 'leased', 'acknowledged', 'quarantined')),
    available_at                               timestamptz NOT NULL DEFAULT now(),
    created_at                                 timestamptz NOT NULL DEFAULT now(),
    lease_owner                                text,
    lease_token                                uuid,
    lease_expires_at                           timestamptz,
    current_attempt_id                         uuid,
    attempt_count                              integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    last_attempt_at                            timestamptz,
    delivered_at                               timestamptz,
    last_error_code                            text REFERENCES outbox.error_codes (code),
    last_error_ref                             text,
    ack_consumer_name                          text,
    ack_receipt_kind                           text,
    ack_receipt_type                           text,
    ack_receipt_ref                            text,
    ack_receipt_schema_version                 integer,
    ack_receipt_digest_algorithm_version       text,
    ack_receipt_digest                         text,
    ack_event_envelope_digest_algorithm_version text,
    ack_event_envelope_sha256                  text,
    PRIMARY KEY (destination, event_id),
    CHECK ((status = 'leased') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL AND lease_owner IS NOT NULL)),
    CHECK (status <> 'acknowledged' OR (delivered_at IS NOT NULL AND ack_receipt_digest IS NOT NULL))
);
CREATE INDEX outbox_deliveries_by_event ON outbox.outbox_deliveries (event_id);

-- Immutable attempt facts (SPEC §2): one start per claim, at most one finish per start.
CREATE TABLE outbox.outbox_delivery_attempt_starts (
    attempt_id     uuid PRIMARY KEY,
    destination    text NOT NULL,
    event_id       uuid NOT NULL,
    attempt_number integer NOT NULL CHECK (attempt_number > 0),
    lease_token    uuid NOT NULL,
    worker         text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (destination, event_id) REFERENCES outbox.outbox_deliveries (destination, event_id),
    UNIQUE (destination, event_id, attempt_number)
);

CREATE TABLE outbox.outbox_delivery_attempt_finishes (
    attempt_id            uuid PRIMARY KEY REFERENCES outbox.outbox_delivery_attempt_starts (attempt_id),
    finished_at           timestamptz NOT NULL DEFAULT now(),
    outcome               text NOT NULL CHECK (outcome IN ('acknowledged', 'retryable', 'non_retryable', 'lease_expired_unknown')),
    retry_disposition     text NOT NULL CHECK (retry_disposition IN ('none', 'retry_scheduled', 'quarantined', 'reclaimable')),
    normalized_error_code text REFERENCES outbox.error_codes (code),
    sanitized_error_ref   text
);

-- Quarantine is a state, never a deletion (SPEC R-AK-6). Only acknowledged_at/case_id change.
CREATE TABLE outbox.outbox_quarantine (
    destination                             text NOT NULL,
    event_id                                uuid NOT NULL,
    attempt_id                              uuid REFERENCES outbox.outbox_delivery_attempt_starts (attempt_id),
    reason                                  text NOT NULL REFERENCES outbox.error_codes (code),
    event_envelope_digest_algorithm_version text NOT NULL,
    event_envelope_sha256                   text NOT NULL,
    quarantined_at                          timestamptz NOT NULL DEFAULT now(),
    acknowledged_at                         timestamptz,
    case_id                                 text,
    PRIMARY KEY (destination, event_id),
    FOREIGN KEY (destination, event_id) REFERENCES outbox.outbox_deliveries (destination, event_id)
);

-- Retry policy per destination (SPEC §2, D-5), versioned; every change lands in the history.
CREATE TABLE outbox.outbox_retry_policies (
    destination    text PRIMARY KEY REFERENCES outbox.delivery_destinations (destination),
    base_delay     interval NOT NULL CHECK (base_delay > interval '0'),
    multiplier     numeric NOT NULL CHECK (multiplier >= 1 AND multiplier <= 10),
    max_delay      interval NOT NULL CHECK (max_delay >= base_delay),
    jitter         numeric NOT NULL CHECK (jitter >= 0 AND jitter < 1),
    max_attempts   integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    policy_version integer NOT NULL DEFAULT 1 CHECK (policy_version > 0),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE outbox.outbox_retry_policy_history (
    change_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination    text NOT NULL,
    policy_version integer NOT NULL,
    operation      text NOT NULL CHECK (operation IN ('INSERT', 'UPDATE', 'DELETE')),
    base_delay     interval,
    multiplier     numeric,
    max_delay      interval,
    jitter         numeric,
    max_attempts   integer,
    changed_by     text NOT NULL DEFAULT current_user,
    changed_at     timestamptz NOT NULL DEFAULT now()
);

RESET ROLE;
