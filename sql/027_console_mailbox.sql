-- The operator console's mailbox panel (issue 25 item 5; SPEC R-MX-12): one read function for
-- outbox_auditor that lists the mailbox sources with their pipeline status. New function only.
SET LOCAL ROLE outbox_owner;

{{ template "functions/mailbox_console_sources.sql" . }}

RESET ROLE;
