-- outbox.publication_summary() for outbox_auditor (issue 23 item 3: all SQL through pgcall):
-- the counts internal/pgcall.ReadPublicationSummary used to compute with a hand-written SELECT
-- over the kernel tables now come from one SECURITY DEFINER function. Nothing else changes.
SET LOCAL ROLE outbox_owner;

{{ template "functions/publication_summary.sql" . }}

RESET ROLE;
