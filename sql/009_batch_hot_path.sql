-- Batch hot path (SPEC D-2, §2, R-AK-1a, R-AK-5, R-AK-9, §12a): canonical envelope stored once,
-- publications in a narrow table, set-based outcome functions.
SET LOCAL ROLE outbox_owner;

-- D-2 / P-5: the canonical envelope bytes the database verified at append are stored once, so a
-- claim returns them and a dispatcher checks sha256(bytes) instead of re-canonicalizing. NULL only for
-- rows written outside append_event (tests that simulate tampering): readers then canonicalize.
ALTER TABLE outbox.outbox_events ADD COLUMN event_envelope_canonical text;
ALTER TABLE outbox.outbox_events DISABLE TRIGGER tg_outbox_events__immutable;
UPDATE outbox.outbox_events AS e
   SET event_envelope_canonical = outbox.jcs_canonicalize(outbox._event_envelope(e)::json);
ALTER TABLE outbox.outbox_events ENABLE TRIGGER tg_outbox_events__immutable;

-- R-AK-1a: receipts are closed documents. Besides the common members (<prefix>Ref/SchemaVersion/
-- DigestAlgorithmVersion/Digest, destination, consumerName, eventId, eventEnvelope*, the kind's
-- time field) a receipt may carry exactly the members registered here for its kind.
CREATE TABLE outbox.receipt_kind_members (
    receipt_kind text NOT NULL REFERENCES outbox.receipt_kinds (receipt_kind),
    member       text NOT NULL CHECK (member ~ '^[a-z][A-Za-z0-9]*$'),
    json_type    text NOT NULL CHECK (json_type IN ('string', 'integer', 'boolean')),
    required     boolean NOT NULL,
    PRIMARY KEY (receipt_kind, member)
);
INSERT INTO outbox.receipt_kind_members (receipt_kind, member, json_type, required)
SELECT k.receipt_kind, m.member, m.json_type, m.required
  FROM outbox.receipt_kinds AS k
  JOIN (VALUES
        ('operations_projection', 'projectionName', 'string', true),
        ('operations_projection', 'projectionVersion', 'integer', true),
        ('operations_projection', 'eventType', 'string', true),
        ('operations_projection', 'eventSchemaVersion', 'string', true),
        ('operations_projection', 'projectionOutcome', 'string', false),
        ('metering_input_processor', 'consumerOutcome', 'string', false),
        ('billing_finalization_coordinator', 'consumerOutcome', 'string', false),
        ('billing_settlement_catch_up', 'consumerOutcome', 'string', false),
        ('broker_publication', 'stream', 'string', true),
        ('broker_publication', 'sequence', 'integer', true),
        ('broker_publication', 'duplicate', 'boolean', true)
       ) AS m(receipt_kind, member, json_type, required) ON m.receipt_kind = k.receipt_kind;
-- Kinds other than operations_projection may name a projection target and the event's type.
INSERT INTO outbox.receipt_kind_members (receipt_kind, member, json_type, required)
SELECT k.receipt_kind, m.member, m.json_type, false
  FROM outbox.receipt_kinds AS k
 CROSS JOIN (VALUES ('projectionName', 'string'), ('projectionVersion', 'integer'),
                    ('eventType', 'string'), ('eventSchemaVersion', 'string')) AS m(member, json_type)
 WHERE k.receipt_kind IN ('metering_input_processor', 'billing_finalization_coordinator', 'billing_settlement_catch_up');
GRANT SELECT ON outbox.receipt_kind_members TO outbox_auditor;

{{ template "functions/_jcs_text_problem.sql" . }}

-- §2 publication table: the event row is written once and never updated; published_at lives in
-- a narrow table written only by the publication function (trigger: OB202 for everyone else).
-- No foreign key to outbox_events: the insert trigger already requires every new row's event to
-- have its deliveries all acknowledged (deliveries reference their event), which implies the
-- event exists; a foreign key would add one lookup per published event for nothing.
CREATE TABLE outbox.outbox_publications (
    event_id     uuid PRIMARY KEY,
    published_at timestamptz NOT NULL
);
COMMENT ON TABLE outbox.outbox_publications IS
    'One row per published event (SPEC §2, R-AK-4): inserted once by the publication function when every mandatory delivery is acknowledged; never updated or deleted.';
INSERT INTO outbox.outbox_publications (event_id, published_at)
SELECT e.event_id, e.published_at FROM outbox.outbox_events AS e WHERE e.published_at IS NOT NULL;
DROP TRIGGER tg_outbox_events__immutable ON outbox.outbox_events;
DROP TRIGGER tg_outbox_events__no_truncate ON outbox.outbox_events;
DROP FUNCTION outbox.tg_outbox_events__immutable();
DROP INDEX outbox.outbox_events_unpublished;
ALTER TABLE outbox.outbox_events DROP COLUMN published_at;
{{ template "triggers/outbox_events__immutable.sql" . }}
{{ template "triggers/outbox_publications__guarded.sql" . }}
GRANT SELECT ON outbox.outbox_publications TO outbox_auditor;

-- append_event stores the canonical text it verified (hot path) or computed (slow path).
DROP FUNCTION outbox.append_event(json, text, text);
{{ template "functions/append_event.sql" . }}

-- D-2 audit: the acknowledged finish keeps the receipt body the ack was checked against, so
-- outbox.verify_ack_digests can re-canonicalize what the hot path trusted.
ALTER TABLE outbox.outbox_delivery_attempt_finishes ADD COLUMN receipt json;

-- Write amplification (P-4): one partial index over non-terminal rows serves both the
-- per_aggregate ordering check (R-CL-7) and the stats scrape (R-DP-4), instead of two, so a
-- claim or a retry inserts one index entry less.
DROP INDEX outbox.outbox_deliveries_stats_nonterminal;
DROP INDEX outbox.outbox_deliveries_open_by_aggregate;
CREATE INDEX outbox_deliveries_open
    ON outbox.outbox_deliveries (destination, aggregate_id, aggregate_revision)
    INCLUDE (status, created_at, last_error_code)
    WHERE status IN ('pending', 'leased');
-- R-AK-5: delivery_stats also reports the oldest open revision gap per destination.
DROP FUNCTION outbox.delivery_stats();
{{ template "functions/delivery_stats.sql" . }}

CREATE OR REPLACE VIEW outbox.delivery_status AS
SELECT dd.destination,
       dd.consumer_name,
       count(d.event_id) FILTER (WHERE d.status = 'pending')      AS pending,
       count(d.event_id) FILTER (WHERE d.status = 'leased')       AS leased,
       count(d.event_id) FILTER (WHERE d.status = 'acknowledged') AS acknowledged,
       count(d.event_id) FILTER (WHERE d.status = 'quarantined')  AS quarantined,
       min(d.created_at) FILTER (WHERE d.status IN ('pending', 'leased')) AS oldest_pending_at,
       COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - min(d.created_at) FILTER (WHERE d.status IN ('pending', 'leased')))), 0), 0)::double precision
           AS oldest_pending_age_seconds,
       COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - min(d.created_at) FILTER (
                    WHERE d.status IN ('pending', 'leased') AND d.last_error_code = 'awaiting_revision'))), 0), 0)::double precision
           AS oldest_gap_age_seconds
FROM outbox.delivery_destinations dd
LEFT JOIN outbox.outbox_deliveries d ON d.destination = dd.destination
GROUP BY dd.destination, dd.consumer_name;
COMMENT ON VIEW outbox.delivery_status IS
    'Per-destination pending/leased/acknowledged/quarantined counts, oldest undelivered age and oldest open revision gap age (R-AK-5) (operator read, outboxctl status). Read-only.';

-- P-4: the deliveries' immutability trigger fires only for a violating update (WHEN clause).
-- (CASCADE drops exactly the triggers that use this function: immutable, no_truncate and, where
-- 005 already installed this file's version, no_delete)
DROP FUNCTION outbox.tg_outbox_deliveries__immutable() CASCADE;
{{ template "triggers/outbox_deliveries__immutable.sql" . }}

-- R-AK-9: batch outcome functions; the one-row functions become batches of one (one rule each).
DROP FUNCTION IF EXISTS outbox.ack_delivery(text, uuid, uuid, uuid, json, json);
DROP FUNCTION IF EXISTS outbox.ack_delivery(text, uuid, uuid, uuid, json, json, text);
DROP FUNCTION IF EXISTS outbox.retry_delivery(text, uuid, uuid, uuid, text, text);
DROP FUNCTION IF EXISTS outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text);
DROP FUNCTION IF EXISTS outbox._ack_validate(outbox.outbox_deliveries, outbox.outbox_events, json, json);
DROP FUNCTION IF EXISTS outbox._publish_event(uuid);
DROP FUNCTION IF EXISTS outbox._dispatch_quarantine(outbox.outbox_deliveries, text, text, text, text, timestamptz);
DROP FUNCTION IF EXISTS outbox._ack_reject(text);
DROP FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamptz);
DROP FUNCTION outbox._dispatch_recover(text[], integer, timestamptz);
DROP FUNCTION IF EXISTS outbox.claim_deliveries(text, text[], integer, interval);
DROP FUNCTION IF EXISTS outbox.claim_deliveries(text, text[], integer, interval, text);
{{ template "functions/_fence_problem.sql" . }}
{{ template "functions/_dispatch_fence.sql" . }}
{{ template "functions/_quarantine_write.sql" . }}
{{ template "functions/_dispatch_recover.sql" . }}
{{ template "functions/_batch_items.sql" . }}
{{ template "functions/_lock_deliveries.sql" . }}
{{ template "functions/_raise_item.sql" . }}
{{ template "functions/_ack_problem.sql" . }}
{{ template "functions/_publish_events.sql" . }}
{{ template "functions/claim_deliveries.sql" . }}
{{ template "functions/ack_deliveries.sql" . }}
{{ template "functions/retry_deliveries.sql" . }}
{{ template "functions/quarantine_deliveries.sql" . }}
{{ template "functions/ack_delivery.sql" . }}
{{ template "functions/retry_delivery.sql" . }}
{{ template "functions/quarantine_delivery.sql" . }}
{{ template "functions/verify_ack_digests.sql" . }}
-- the event sweep also checks the stored canonical envelope text
DROP FUNCTION outbox.verify_event_digests(integer);
{{ template "functions/verify_event_digests.sql" . }}

RESET ROLE;
