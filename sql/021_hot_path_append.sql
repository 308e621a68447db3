-- The append hot path (SPEC §12a P-6, HP-1, HP-2; R-AP-5, R-AK-9): append_events judges the
-- producer library's envelopes with one set-based predicate instead of one PL/pgSQL call per
-- element, and the deferred delivery-set proof of R-AP-5 runs once per transaction instead of
-- once per inserted row.
--  * outbox.outbox_append_proofs: UNLOGGED, one short-lived row per INSERT statement on the
--    events or deliveries (the ids it touched), deleted again by the COMMIT-time proof of its own
--    transaction; unlogged because it never outlives its transaction (a crash aborts that too).
--  * the two row-level deferred constraint triggers and outbox._check_event_delivery_set are
--    replaced by statement-level AFTER INSERT triggers with transition tables (same names) and one
--    deferred constraint trigger on the recording table (docs/migrations.md rule 2; the trigger
--    file is re-rendered into 005, whose functions this migration drops first).
--  * append_events is re-created from its file (same signature; append_event unchanged).
-- Locks: SHARE ROW EXCLUSIVE on outbox_events and outbox_deliveries for the trigger swap (appends
-- wait for the migration; claims and acks keep going). No rewrite, no backfill.
SET LOCAL ROLE outbox_owner;

CREATE UNLOGGED TABLE outbox.outbox_append_proofs (
    xact      xid8   NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    event_ids uuid[] NOT NULL
);
CREATE INDEX outbox_append_proofs_xact ON outbox.outbox_append_proofs (xact);
COMMENT ON TABLE outbox.outbox_append_proofs IS
    'Event ids each INSERT statement on outbox_events/outbox_deliveries touched, proven and deleted at COMMIT by tg_outbox_append_proofs__check (SPEC R-AP-5).';

DROP TRIGGER tg_outbox_events__delivery_set_complete ON outbox.outbox_events;
DROP TRIGGER tg_outbox_deliveries__delivery_set_member ON outbox.outbox_deliveries;
DROP FUNCTION outbox.tg_outbox_events__delivery_set_complete();
DROP FUNCTION outbox.tg_outbox_deliveries__delivery_set_member();
DROP FUNCTION IF EXISTS outbox._check_event_delivery_set(uuid);
{{ template "triggers/outbox_events__delivery_set_complete.sql" . }}
{{ template "triggers/outbox_append_proofs__check.sql" . }}

DROP FUNCTION outbox.append_events(json, text[], text[]);
{{ template "functions/append_events.sql" . }}

RESET ROLE;
