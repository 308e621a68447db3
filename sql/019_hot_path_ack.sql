-- Hot path, set-based in fact (SPEC §12a HP-1..HP-4, R-AK-1a, R-AK-2, R-AK-4, R-AK-9, D-2):
--   * outbox.ack_deliveries judges every item with ONE predicate of one statement (fencing, the
--     frozen member, the event, the receipt rebuilt as canonical text and hashed with sha256());
--     the full rule runs only for the items the predicate rejects, through the new private
--     outbox._ack_item_problem; accepted deliveries are updated by ctid and their finishes
--     inserted in one statement; every statement is planned for its call (force_custom_plan).
--   * outbox._publish_events counts and publishes the batch's complete events in one statement
--     each; published_at is the clock at the publishing statement (R-AK-4: never earlier than
--     an acknowledgement of the event that committed meanwhile).
--   * the publication guard checks each new row with an index lookup (no scan), planned per
--     statement; its function now lives in triggers/outbox_publications__guarded_function.sql.
--   * retry_deliveries: outbox._dispatch_sanitize_ref and outbox._backoff_delay are inlinable SQL
--     (no per-item call, HP-1); retry_deliveries' plans are index lookups (HP-3).
--   * outbox._ack_problem and inbox.record_receipt refuse integer members written with a
--     fraction or an exponent (…SchemaVersion: 1.0 or 1e0) with OB002 (R-AK-1a).
-- Function bodies only: no table changes, nothing to stop; one transaction (tern).
SET LOCAL ROLE outbox_owner;

DROP FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text);
{{ template "functions/_ack_problem.sql" . }}
{{ template "functions/_ack_item_problem.sql" . }}
{{ template "functions/_receipt_member_piece.sql" . }}
DROP FUNCTION outbox._batch_items(json, text, text[], text[]);
{{ template "functions/_batch_items.sql" . }}
DROP FUNCTION outbox.ack_deliveries(json);
{{ template "functions/ack_deliveries.sql" . }}
DROP FUNCTION outbox._publish_events(uuid[], timestamptz);
{{ template "functions/_publish_events.sql" . }}
{{ template "triggers/outbox_publications__guarded_function.sql" . }}
-- retry_deliveries without per-item calls: the ref sanitizer and the backoff become inlinable
-- SQL expressions (no SET clause; schema-qualified)
DROP FUNCTION outbox._dispatch_sanitize_ref(text);
{{ template "functions/_dispatch_sanitize_ref.sql" . }}
DROP FUNCTION outbox._backoff_delay(outbox.outbox_retry_policies, integer);
{{ template "functions/_backoff_delay.sql" . }}
DROP FUNCTION outbox.retry_deliveries(json);
{{ template "functions/retry_deliveries.sql" . }}
DROP FUNCTION inbox.record_receipt(text, text, integer, json, json, text);
{{ template "functions/record_receipt.sql" . }}

RESET ROLE;
