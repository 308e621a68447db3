-- Claim hot path (SPEC P-4, HP-1, HP-3, HP-5, R-CL-1..3, R-CL-6; issue 20 item 4):
--   * outbox.claim_deliveries is re-created from its file: the destination check, the distinct
--     destination list and the lease-expiry probe are one statement; the claim is one static
--     statement (lock, one UPDATE per claimed delivery, the attempt starts in one INSERT, each
--     event by primary key) under SET plan_cache_mode = force_custom_plan, so no generic plan
--     made while outbox_deliveries was small or unanalyzed is ever reused (HP-3), and the
--     statement is parsed once per session instead of on every call (EXECUTE did both).
--   * The foreign key outbox_delivery_attempt_starts (destination, event_id) ->
--     outbox_deliveries is dropped. It cost every claimed delivery an RI trigger query and a
--     KEY SHARE lock (a WAL record) on the row the same statement had just updated: ~0.3 ms of a
--     claim of 100 (measured, EXPLAIN ANALYZE). It guarded nothing a writer could break: the only
--     writer of attempt starts is outbox.claim_deliveries (SECURITY DEFINER, outbox_owner), which
--     builds each start from the delivery row its own UPDATE ... RETURNING produced; starts are
--     append-only (UPDATE and TRUNCATE refused, DELETE only by outbox.archive_events, which
--     deletes a delivery's starts in the same transaction as the delivery); deliveries are never
--     deleted otherwise (OB202). The finishes keep their foreign key to the starts, the
--     quarantine rows theirs to the deliveries.
-- Not changed, on purpose (measured and explained in docs/performance.md "Claim hot path"): the
-- claim's UPDATE stays a non-HOT update. On PostgreSQL 15 an update is HOT only when no indexed
-- column (key, INCLUDE or partial-index predicate) changes value, and a claim must change status
-- (the claimable and open predicates) and lease_expires_at (the key of the leased index, which
-- lease recovery needs so it stays O(leased), R-CL-2, R-CL-6); no index layout keeps both the
-- O(batch) claim scan and the O(leased) expiry probe without one of those columns.
-- Locks: ACCESS EXCLUSIVE on outbox_delivery_attempt_starts for the DROP CONSTRAINT (no scan,
-- no rewrite: a catalog change; SHARE ROW EXCLUSIVE on outbox_deliveries for the RI triggers),
-- the function catalog for the re-creation. Stop dispatchers while it runs (a claim in flight
-- waits on the locks otherwise); it takes milliseconds.
SET LOCAL ROLE outbox_owner;

ALTER TABLE outbox.outbox_delivery_attempt_starts
    DROP CONSTRAINT outbox_delivery_attempt_starts_destination_event_id_fkey;

DROP FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text);
{{ template "functions/claim_deliveries.sql" . }}

RESET ROLE;
