-- outbox._archive_digest_problem(e outbox.outbox_events) RETURNS text
-- Purpose: the digest re-verification of SPEC R-RT-1 before an event is archived: NULL when the
--   database's own canonicalizer reproduces the stored jcs-sha256-v1 digest of the event's
--   stored columns, else a short problem (never document content). Never raises.
-- How (cheap where the append already stored the verified canonical text, D-2): the stored
--   canonical text is exactly an RFC 8785 canonical text (outbox._jcs_text_problem), its
--   sha256 is the stored digest, and it parses to the envelope rebuilt from the stored columns
--   (outbox._event_envelope; a canonical text is unique for its JSON value, so equal values
--   mean the canonicalizer would print exactly these bytes). A row without stored canonical
--   text (written outside append) is canonicalized in full (outbox.jcs_canonicalize).
-- Caller: outbox.archive_events (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._archive_digest_problem(e outbox.outbox_events)
 RETURNS text
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_canon   text := e.event_envelope_canonical;
    v_problem text;
BEGIN
    IF e.event_envelope_digest_algorithm_version IS DISTINCT FROM 'jcs-sha256-v1' THEN
        RETURN 'unknown_digest_algorithm';
    END IF;
    IF v_canon IS NULL THEN
        BEGIN
            v_canon := outbox.jcs_canonicalize(outbox._event_envelope(e)::json);
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            RETURN 'not_canonicalizable: ' || SQLERRM;
        END;
    ELSE
        v_problem := outbox._jcs_text_problem(v_canon);
        IF v_problem IS NOT NULL THEN
            RETURN 'canonical_text_not_canonical: ' || v_problem;
        END IF;
        IF v_canon::jsonb <> outbox._event_envelope(e) THEN
            RETURN 'canonical_text_mismatch: the stored canonical envelope is not the envelope of the stored columns';
        END IF;
    END IF;
    IF outbox._sha256_hex(v_canon) <> e.event_envelope_sha256 THEN
        RETURN pg_catalog.format('digest_mismatch: stored %s, recomputed %s', e.event_envelope_sha256, outbox._sha256_hex(v_canon));
    END IF;
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION outbox._archive_digest_problem(outbox.outbox_events) IS
    'Private: NULL when the database canonicalizer reproduces the stored digest of an event, else the problem (SPEC R-RT-1).';

REVOKE ALL ON FUNCTION outbox._archive_digest_problem(outbox.outbox_events) FROM PUBLIC;
