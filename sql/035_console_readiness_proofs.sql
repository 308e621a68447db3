-- The last cutover readiness proofs on the status page (issue 24 item 6; SPEC R-PV-5): one read
-- function for outbox_auditor. New function only.
SET LOCAL ROLE outbox_owner;

{{ template "functions/console_readiness_proofs.sql" . }}

RESET ROLE;
