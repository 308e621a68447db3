-- Operator console (issue 25; SPEC R-OP-4, R-AK-10): read functions for the console that
-- `outboxctl serve` renders - delivery detail by event id, keyset-paged delivery lists with
-- bounded counts, and per-destination activity for the charts - all granted to outbox_auditor
-- only (the console's read session). The redeliver action reuses outbox.preview_redelivery and
-- outbox.redeliver_quarantined (outbox_operator) unchanged.
-- Indexes:
--   * outbox_deliveries_console (destination, status, created_at, event_id): keyset pages, oldest
--     first, and bounded counts of one destination's deliveries in one state. No existing index
--     has this order (outbox_deliveries_claimable is by available_at, outbox_deliveries_leased by
--     expiry); without it a page reads and sorts every delivery of the state. Cost on the hot
--     path: every state change (claim, retry, ack, quarantine, recovery) already writes a new row
--     version into the other indexes (status is indexed, so no HOT update); this adds one b-tree
--     insertion per change (about 60 bytes per delivery).
--   * outbox_delivery_attempt_finishes_finished_brin: the charts' last-hour window over the
--     append-only finishes (BRIN: a few pages, negligible write cost).
-- Applied to a running database: CREATE INDEX (not CONCURRENTLY: tern runs a migration in one
-- transaction) takes a SHARE lock on outbox_deliveries and on the finishes while it builds, so
-- claims and acks wait for the build (seconds at 10^6 deliveries); plan it with the dispatchers.
SET LOCAL ROLE outbox_owner;

CREATE INDEX outbox_deliveries_console
    ON outbox.outbox_deliveries (destination, status, created_at, event_id);
CREATE INDEX outbox_delivery_attempt_finishes_finished_brin
    ON outbox.outbox_delivery_attempt_finishes USING brin (finished_at);

{{ template "functions/console_event.sql" . }}
{{ template "functions/console_event_payload.sql" . }}
{{ template "functions/console_event_deliveries.sql" . }}
{{ template "functions/console_event_attempts.sql" . }}
{{ template "functions/console_deliveries.sql" . }}
{{ template "functions/console_delivery_counts.sql" . }}
{{ template "functions/console_activity.sql" . }}

RESET ROLE;
