-- outbox._jcs_text_problem(p_text text) RETURNS text  (private, SPEC D-2 "the hot path accepts
--   exactly what the slow path accepts")
-- Purpose: decide whether a caller-supplied canonical text is exactly the RFC 8785 (JCS) form of
--   a document the slow path (outbox.jcs_canonicalize) accepts. Returns NULL when it is, else a
--   short problem description (no document content). Never raises.
-- STUB: this first body falls back to the full canonicalizer; the cheap set-based checks replace it.
-- Caller: the hot paths of append_event(s), ack_delivery/ack_deliveries, inbox.record_receipt;
--   granted to nobody.
CREATE OR REPLACE FUNCTION outbox._jcs_text_problem(p_text text)
RETURNS text
LANGUAGE plpgsql
STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_text IS NULL THEN
        RETURN 'canonical text is NULL';
    END IF;
    IF outbox.jcs_canonicalize(p_text::json) IS DISTINCT FROM p_text THEN
        RETURN 'text is not the RFC 8785 canonical form of its document';
    END IF;
    RETURN NULL;
EXCEPTION WHEN SQLSTATE 'OB201' OR invalid_text_representation THEN
    RETURN pg_catalog.format('not canonicalizable: %s', SQLERRM);
END
$fn$;

COMMENT ON FUNCTION outbox._jcs_text_problem(text) IS
    'Private: NULL when the text is exactly the RFC 8785 canonical form of a document the slow path accepts, else a problem (SPEC D-2).';
REVOKE ALL ON FUNCTION outbox._jcs_text_problem(text) FROM PUBLIC;
