-- outbox._sha256_hex(p_text text) RETURNS text  (private helper, SPEC D-2)
-- Lower-case hex SHA-256 of the UTF-8 bytes of p_text. Used by SECURITY DEFINER functions of the
-- kernel (registry, append) that already hold canonical text. Raises nothing of its own.
-- Caller: kernel functions running as outbox_owner only; granted to nobody.
-- No SET search_path on purpose: a LANGUAGE sql function with SET is never inlined (measured
-- ~35 µs per call on the append hot path); every name is schema-qualified.
CREATE OR REPLACE FUNCTION outbox._sha256_hex(p_text text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$
    SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_text, 'UTF8')), 'hex')
$function$;

COMMENT ON FUNCTION outbox._sha256_hex(text) IS
    'Private: lower-case hex SHA-256 of the UTF-8 bytes of a text (SPEC D-2).';

REVOKE ALL ON FUNCTION outbox._sha256_hex(text) FROM PUBLIC;
