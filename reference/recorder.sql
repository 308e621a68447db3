-- Domain schema of a recording reference consumer (metering_input_processor_consumer,
-- billing_finalization_coordinator_consumer, billing_settlement_catch_up_consumer): what it
-- received, one row per event id, and an effects counter proving "applied exactly once".
-- __schema__ is replaced by the consumer's schema name.
CREATE SCHEMA IF NOT EXISTS __schema__;

CREATE TABLE IF NOT EXISTS __schema__.received_events (
    event_id             uuid PRIMARY KEY,
    event_type           text NOT NULL,
    event_schema_version text NOT NULL,
    aggregate_id         text NOT NULL,
    aggregate_revision   bigint NOT NULL,
    envelope_sha256      text NOT NULL,
    occurred_at          timestamptz NOT NULL,
    received_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS __schema__.effects (
    event_id      uuid PRIMARY KEY,
    event_type    text NOT NULL,
    applied_count integer NOT NULL
);
