-- Canonical JSON (RFC 8785) and jcs-sha256-v1 digests (SPEC D-2). PL/pgSQL twin of internal/canon;
-- both are held byte-identical by the golden vectors in tests/jcs_test.go (T-6).
SET LOCAL ROLE outbox_owner;

-- Private helpers: owned by outbox_owner, EXECUTE revoked from PUBLIC, granted to nobody.
{{ template "functions/_sha256_hex.sql" . }}
{{ template "functions/_jcs_sort_key.sql" . }}
{{ template "functions/_jcs_number.sql" . }}
{{ template "functions/_jcs_value.sql" . }}

-- Public API: SECURITY DEFINER only to reach the private helpers; granted to every kernel role.
{{ template "functions/jcs_canonicalize.sql" . }}
{{ template "functions/jcs_sha256.sql" . }}

-- Callers need USAGE on the schema to reach the functions (idempotent; other areas may repeat it).
GRANT USAGE ON SCHEMA outbox
    TO outbox_registrar, outbox_producer, outbox_dispatcher, outbox_consumer, outbox_auditor;

RESET ROLE;
