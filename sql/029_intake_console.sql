-- The intake on the status page and the console (issue 22 item 6; SPEC R-OB-5, R-OP-4): one read
-- function for outbox_auditor listing the most recent accepted observations without their
-- bodies. New function only.
SET LOCAL ROLE outbox_owner;

{{ template "functions/console_observations.sql" . }}

RESET ROLE;
