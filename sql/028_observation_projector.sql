-- The observation projector path (SPEC §11a R-OB-4, §13 "Observation intake"; issue 22 item 3):
--   * intake.observation_deliveries: one work row per (registered projector consumer,
--     accepted observation), written by statement-level triggers when an observation is accepted
--     (one INSERT ... SELECT per accepting statement, HP-1) and when a projector is registered
--     (backfill of every accepted observation, after the in-flight accepts committed);
--   * intake.claim_observations / intake.ack_observations (role outbox_observation_projector):
--     fenced leases in (acceptedAt, observationId) order; an ack needs the live lease token, the
--     accepted envelope digest and the projector's receipt for every registered projection of
--     that consumer (another consumer's or projection's receipt never satisfies it);
--   * inbox.record_observation_receipt (the projector's bound consumer role): insert-or-compare;
--   * completeness proofs of accepted observations (scope {"sourceKind":"observation"}: their
--     own member set digest and receipt anti-join, so observation traffic never makes an event
--     proof stale) and search_exact_id('observationId', ...) = matched | inconclusive with
--     reason positive_match_only (never not_found).
-- Applied to a running database: one new table, triggers on intake tables, new functions and
-- three redefined outbox read functions (no lock on any delivery table).
SET LOCAL ROLE outbox_owner;

CREATE TABLE intake.observation_deliveries (
    consumer_name    text NOT NULL,
    -- no foreign key to intake.observation_ids: the rows are written only by the triggers below,
    -- from accepted rows, and a per-row RI check doubled the fan-out's cost on the accept path
    observation_id   uuid NOT NULL,
    accepted_at      timestamptz NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'leased', 'acknowledged')),
    lease_token      uuid,
    lease_owner      text,
    lease_expires_at timestamptz,
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    acknowledged_at  timestamptz,
    PRIMARY KEY (consumer_name, observation_id),
    CHECK ((status = 'pending') = (lease_token IS NULL)),
    CHECK (status = 'pending' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (status <> 'acknowledged' OR acknowledged_at IS NOT NULL)
);
-- the claim's order: open rows of one consumer by (acceptedAt, observationId)
CREATE INDEX observation_deliveries_open ON intake.observation_deliveries (consumer_name, accepted_at, observation_id)
    WHERE status <> 'acknowledged';
COMMENT ON TABLE intake.observation_deliveries IS
    'One work row per registered observation projector consumer and accepted observation (SPEC R-OB-4); written by triggers, changed only by claim_observations/ack_observations.';

{{ template "triggers/observation_deliveries__fanout.sql" . }}

{{ template "functions/claim_observations.sql" . }}
{{ template "functions/ack_observations.sql" . }}
{{ template "functions/record_observation_receipt.sql" . }}
{{ template "functions/_observation_completeness_document.sql" . }}

DROP FUNCTION outbox._completeness_filter(json);
{{ template "functions/_completeness_filter.sql" . }}
DROP FUNCTION outbox._completeness_document(text);
{{ template "functions/_completeness_document.sql" . }}
DROP FUNCTION outbox.search_exact_id(text, text);
{{ template "functions/search_exact_id.sql" . }}

RESET ROLE;
