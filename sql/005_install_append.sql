-- append_event, immutability and the deferred delivery-set anti-join (SPEC §3.2, R-SEC-3)
SET LOCAL ROLE outbox_owner;

SELECT 1; -- placeholder, filled by the area that owns this migration

RESET ROLE;
