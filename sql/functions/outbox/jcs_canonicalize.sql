-- outbox.jcs_canonicalize(p_doc json) RETURNS text  (public, SPEC D-2)
-- Purpose: the RFC 8785 (JCS) canonical text of a JSON document, restricted to the
--   jcs-sha256-v1 subset: numbers are integers with |n| <= 2^53-1 (56.0, 1E2, -0 are accepted and
--   written 56, 100, 0), member names are unique, no string holds U+0000, at most 64 nested
--   objects/arrays. The parameter is json, not jsonb, so that duplicate names can be detected.
--   Byte-identical to internal/canon (Go) by the golden vectors of T-6. NULL in, NULL out.
-- Locking: none; IMMUTABLE, PARALLEL UNSAFE (the EXCEPTION block of jcs_canonicalize starts a
--   subtransaction, which no process may do during a parallel query; TestJCSInParallelQuery).
-- SQLSTATEs: OB201 document not canonicalizable (duplicate name, non-integer or unsafe number,
--   \u0000, lone surrogate escape, nesting deeper than 64, a member name longer than 1024
--   characters, a document larger than kernel_settings max_payload_bytes: R-SEC-5). Text that is not JSON at all fails
--   with 22P02 in the json cast before this function runs.
-- Security: SECURITY DEFINER (owned by outbox_owner) only so that the caller can run the private,
--   ungranted helpers outbox._jcs_*; it touches no table.
-- Callers: every kernel role (outbox_owner, registrar, producer, dispatcher, consumer, auditor).
CREATE OR REPLACE FUNCTION outbox.jcs_canonicalize(p_doc json)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE STRICT SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_max bigint;
BEGIN
    -- R-SEC-5: bounded input, like append_event (kernel_settings max_payload_bytes, 1 MiB default)
    SELECT k.value INTO v_max FROM outbox.kernel_settings AS k WHERE k.name = 'max_payload_bytes';
    IF pg_catalog.octet_length(p_doc::text) > coalesce(v_max, 1048576) THEN
        RAISE EXCEPTION 'jcs: document larger than max_payload_bytes'
            USING ERRCODE = 'OB201',
                  DETAIL = pg_catalog.format('%s bytes; jcs-sha256-v1 documents are at most %s bytes (outbox.kernel_settings max_payload_bytes)',
                                             pg_catalog.octet_length(p_doc::text), coalesce(v_max, 1048576));
    END IF;
    RETURN outbox._jcs_value(p_doc, 1);
EXCEPTION
    WHEN untranslatable_character OR invalid_text_representation OR character_not_in_repertoire THEN
        -- raised by PostgreSQL while de-escaping strings: \u0000 (22P05), lone surrogates (22P02)
        RAISE EXCEPTION 'jcs: document not canonicalizable: %', SQLERRM
            USING ERRCODE = 'OB201', DETAIL = 'strings must not hold \u0000 or unpaired surrogate escapes';
END
$function$;

COMMENT ON FUNCTION outbox.jcs_canonicalize(json) IS
    E'RFC 8785 (JCS) canonical text of a JSON document, jcs-sha256-v1 subset (integers |n| <= 2^53-1, unique names, no \\u0000, depth <= 64); OB201 otherwise. SPEC D-2.';

REVOKE ALL ON FUNCTION outbox.jcs_canonicalize(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.jcs_canonicalize(json) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.jcs_canonicalize(json) TO outbox_consumer;
GRANT EXECUTE ON FUNCTION outbox.jcs_canonicalize(json) TO outbox_dispatcher;
GRANT EXECUTE ON FUNCTION outbox.jcs_canonicalize(json) TO outbox_producer;
GRANT EXECUTE ON FUNCTION outbox.jcs_canonicalize(json) TO outbox_registrar;
