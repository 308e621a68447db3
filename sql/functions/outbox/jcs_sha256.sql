-- outbox.jcs_sha256(p_doc json) RETURNS text  (public, SPEC D-2)
-- Purpose: the jcs-sha256-v1 digest of a JSON document: 64 lower-case hex digits of the SHA-256
--   of the UTF-8 bytes of outbox.jcs_canonicalize(p_doc). Equal to canon.SHA256Hex in Go.
--   NULL in, NULL out.
-- Locking: none; IMMUTABLE, PARALLEL UNSAFE (the EXCEPTION block of jcs_canonicalize starts a
--   subtransaction, which no process may do during a parallel query; TestJCSInParallelQuery).
-- SQLSTATEs: OB201 document not canonicalizable (see outbox.jcs_canonicalize); 22P02 from the
--   json cast when the text is not JSON.
-- Security: SECURITY DEFINER (owned by outbox_owner) only to reach the ungranted private helpers;
--   it touches no table.
-- Callers: every kernel role (outbox_owner, registrar, producer, dispatcher, consumer, auditor).
CREATE OR REPLACE FUNCTION outbox.jcs_sha256(p_doc json)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE STRICT SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN outbox._sha256_hex(outbox.jcs_canonicalize(p_doc));
END
$function$;

COMMENT ON FUNCTION outbox.jcs_sha256(json) IS
    'jcs-sha256-v1 digest: lower-case hex SHA-256 of the UTF-8 bytes of outbox.jcs_canonicalize(doc); OB201 when not canonicalizable. SPEC D-2.';

REVOKE ALL ON FUNCTION outbox.jcs_sha256(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.jcs_sha256(json) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.jcs_sha256(json) TO outbox_consumer;
GRANT EXECUTE ON FUNCTION outbox.jcs_sha256(json) TO outbox_dispatcher;
GRANT EXECUTE ON FUNCTION outbox.jcs_sha256(json) TO outbox_producer;
GRANT EXECUTE ON FUNCTION outbox.jcs_sha256(json) TO outbox_registrar;
