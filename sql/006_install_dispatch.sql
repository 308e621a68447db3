-- Claim, lease fencing, attempts, ack, retry, quarantine, recovery, publication (SPEC §4, §5)
SET LOCAL ROLE outbox_owner;

SELECT 1; -- placeholder, filled by the area that owns this migration

RESET ROLE;
