-- Domain schema of the reference observation projector (projection observation_log v1, SPEC
-- R-OB-4). __schema__ is replaced by the schema name (refconsumer_observations by default).
-- One row per projected observation: who sent it (the trusted source), what kind, and the few
-- low-sensitivity fields an operator filters by. Observations are evidence, never domain facts:
-- nothing here links them to an operation.
CREATE SCHEMA IF NOT EXISTS __schema__;

CREATE TABLE IF NOT EXISTS __schema__.observation_log (
    observation_id             uuid PRIMARY KEY,
    accepted_at                timestamptz NOT NULL,
    workload_principal_id      text NOT NULL,
    observation_type           text NOT NULL,
    observation_schema_version integer NOT NULL,
    outcome                    text,
    normalized_code            text,
    projected_at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS observation_log_accepted ON __schema__.observation_log (accepted_at, observation_id);
