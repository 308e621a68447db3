-- outbox.verify_event_digests(max_rows int DEFAULT 10000)
-- Purpose: the audit sweep of SPEC D-2. Recomputes, with the database's own canonicalizer,
--   the jcs-sha256-v1 digest of the envelope rebuilt from each event's stored columns (the
--   newest max_rows events) and returns one row per event whose stored digest is not
--   reproduced, or whose frozen quartet is not a registered definition. An empty result is the
--   proof that every stored digest checked is the database's own. It also reports a stored
--   canonical envelope text (D-2: what claims hand to dispatchers) that is not exactly that form.
-- Locking: none (plain reads).
-- Raises: 22023 when max_rows is outside 1..1000000.
-- Caller: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.verify_event_digests(p_max_rows integer DEFAULT 10000)
 RETURNS TABLE(event_id uuid, problem text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_event    outbox.outbox_events%ROWTYPE;
    v_computed text;
    v_canon    text;
BEGIN
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 1000000' USING ERRCODE = '22023';
    END IF;
    FOR v_event IN SELECT * FROM outbox.outbox_events e ORDER BY e.created_at DESC, e.event_id LIMIT p_max_rows LOOP
        BEGIN
            v_canon := outbox.jcs_canonicalize(outbox._event_envelope(v_event)::json);
            v_computed := outbox._sha256_hex(v_canon);
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            event_id := v_event.event_id;
            problem := 'not_canonicalizable: ' || SQLERRM;
            RETURN NEXT;
            CONTINUE;
        END;
        IF v_computed <> v_event.event_envelope_sha256 THEN
            event_id := v_event.event_id;
            problem := format('digest_mismatch: stored %s, recomputed %s', v_event.event_envelope_sha256, v_computed);
            RETURN NEXT;
        -- the stored canonical text (D-2, what claims hand to dispatchers) must be exactly it
        ELSIF v_event.event_envelope_canonical IS DISTINCT FROM v_canon AND v_event.event_envelope_canonical IS NOT NULL THEN
            event_id := v_event.event_id;
            problem := 'canonical_text_mismatch: the stored canonical envelope is not the canonical form of the event';
            RETURN NEXT;
        END IF;
        IF v_event.event_envelope_digest_algorithm_version <> 'jcs-sha256-v1' THEN
            event_id := v_event.event_id;
            problem := 'unknown_digest_algorithm';
            RETURN NEXT;
        END IF;
    END LOOP;
END
$function$;

COMMENT ON FUNCTION outbox.verify_event_digests(integer) IS
    'Audit sweep: events whose stored envelope digest the database''s own canonicalizer does not reproduce (SPEC D-2). Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.verify_event_digests(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.verify_event_digests(integer) TO outbox_auditor;
