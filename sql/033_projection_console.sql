-- Projection versions on the status page, in /metrics and in outboxctl (issue 24 item 6, SPEC
-- R-PV-5): one read function for outbox_auditor listing every registered projection version with
-- its state, its live build and the build's progress. New function only.
SET LOCAL ROLE outbox_owner;

{{ template "functions/console_projection_versions.sql" . }}

RESET ROLE;
