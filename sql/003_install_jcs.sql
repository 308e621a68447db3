-- Canonical JSON (RFC 8785) and jcs-sha256-v1 digests (SPEC D-2)
SET LOCAL ROLE outbox_owner;

SELECT 1; -- placeholder, filled by the area that owns this migration

RESET ROLE;
