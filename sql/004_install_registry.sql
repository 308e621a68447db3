-- Destination and delivery-set registry (SPEC §3.1, R-DS-1..6)
SET LOCAL ROLE outbox_owner;

SELECT 1; -- placeholder, filled by the area that owns this migration

RESET ROLE;
