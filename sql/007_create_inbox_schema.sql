-- Consumer-side inbox: receipts and revision progress (SPEC §6)
SET LOCAL ROLE outbox_owner;

SELECT 1; -- placeholder, filled by the area that owns this migration

RESET ROLE;
