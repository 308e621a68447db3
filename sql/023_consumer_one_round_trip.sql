-- The consumer kit's one round trip per delivery (issue 21 item 2; SPEC R-CO-1..3, §12a):
-- inbox.accept_delivery (existing-receipt read, revision check, receipt insert-or-compare in one
-- call) and inbox.confirm_delivery (the chain's last statement: rolls back a chain whose receipt
-- was not inserted by it). New functions only; nothing existing changes.
SET LOCAL ROLE outbox_owner;

{{ template "functions/accept_delivery.sql" . }}
{{ template "functions/confirm_delivery.sql" . }}

RESET ROLE;
