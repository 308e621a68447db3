-- Operator and auditor read-only views and stats (SPEC R-DP-4, R-SEC-4)
SET LOCAL ROLE outbox_owner;

SELECT 1; -- placeholder, filled by the area that owns this migration

RESET ROLE;
