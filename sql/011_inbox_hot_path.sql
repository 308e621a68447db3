-- Inbox hot path and audit sweep (SPEC D-2 "hot path for receipts", R-AK-1a, R-CO-1, §13).
--   * inbox.record_receipt gains p_receipt_digest_candidate text DEFAULT NULL: with it (and the
--     receipt as canonical text) the database verifies instead of canonicalizing; the envelope
--     digest is sha256 of the envelope bytes when they are canonical; receipts are closed
--     documents (outbox.receipt_kind_members, migration 009).
--   * inbox.verify_receipt_digests(max_rows) re-canonicalizes stored receipts (outbox_auditor).
-- Both record_receipt signatures are dropped: a database migrated before this change holds the
-- five-argument function from 007; a fresh one got the six-argument function when 007 rendered
-- the current file (templates are rendered from the current files, docs/migrations.md; the
-- PL/pgSQL body binds outbox.receipt_kind_members and outbox._jcs_text_problem at its first
-- call, after 009, as append_event's body does with 009's column).
SET LOCAL ROLE outbox_owner;

DROP FUNCTION IF EXISTS inbox.record_receipt(text, text, integer, json, json);
DROP FUNCTION IF EXISTS inbox.record_receipt(text, text, integer, json, json, text);
{{ template "functions/record_receipt.sql" . }}

{{ template "functions/verify_receipt_digests.sql" . }}

RESET ROLE;
