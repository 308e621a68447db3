-- inbox.verify_receipt_digests(p_max_rows integer DEFAULT 10000)
--   RETURNS TABLE(consumer_name text, event_id uuid, problem text)  (public, SPEC D-2, R-CO-1, §13)
-- Purpose: the audit sweep of the receipt hot path (D-2): re-canonicalizes the newest max_rows
--   stored receipts with outbox.jcs_canonicalize and returns one row per problem
--   (not_canonicalizable, not_canonical, digest_mismatch, column_mismatch). An empty result proves
--   every receipt checked is what the slow path would have stored.
-- Locking: none (each check in its own subtransaction, so a damaged row does not stop the sweep).
-- SQLSTATEs: 22023 when max_rows is outside 1..1000000.
-- Design notes (what each problem means): docs/contract.md#inboxverify_receipt_digests
-- Caller: outbox_auditor, SECURITY DEFINER: the auditor may read the table but not run the
--   private canonicalizer helpers.
CREATE OR REPLACE FUNCTION inbox.verify_receipt_digests(p_max_rows integer DEFAULT 10000)
 RETURNS TABLE(consumer_name text, event_id uuid, problem text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_row       record;
    v_canonical text;
    v_doc       jsonb;
    v_computed  text;
    v_member    text;
BEGIN
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 1000000' USING ERRCODE = '22023';
    END IF;
    FOR v_row IN
        SELECT r.consumer_name, r.event_id, r.receipt_document, r.receipt_digest, r.receipt_ref,
               r.receipt_time, r.destination, r.event_envelope_sha256, k.field_prefix, k.time_field
          FROM inbox.inbox_receipts AS r
          JOIN outbox.receipt_kinds AS k ON k.receipt_kind = r.receipt_kind
         ORDER BY r.recorded_at DESC, r.consumer_name, r.projection_name, r.projection_version, r.event_id
         LIMIT p_max_rows
    LOOP
        consumer_name := v_row.consumer_name;
        event_id := v_row.event_id;
        BEGIN
            v_canonical := outbox.jcs_canonicalize(v_row.receipt_document::json);
        EXCEPTION WHEN SQLSTATE 'OB201' OR invalid_text_representation OR untranslatable_character THEN
            problem := 'not_canonicalizable: ' || SQLERRM;
            RETURN NEXT;
            CONTINUE;
        END;
        IF v_canonical <> v_row.receipt_document THEN
            problem := 'not_canonical: the stored text is not the RFC 8785 form of its document';
            RETURN NEXT;
        END IF;
        v_doc := v_canonical::jsonb;
        IF pg_catalog.jsonb_typeof(v_doc) <> 'object' THEN
            problem := 'not_canonicalizable: the stored document is not a JSON object';
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_computed := outbox.jcs_sha256((v_doc - (v_row.field_prefix || 'Ref') - (v_row.field_prefix || 'Digest')
                                         - v_row.time_field)::json);
        IF v_computed <> v_row.receipt_digest THEN
            problem := pg_catalog.format('digest_mismatch: stored %s, recomputed %s', v_row.receipt_digest, v_computed);
            RETURN NEXT;
        END IF;
        SELECT pg_catalog.string_agg(c.member, ', ' ORDER BY c.ord) INTO v_member
          FROM (VALUES (1, v_row.field_prefix || 'Digest', v_row.receipt_digest),
                       (2, v_row.field_prefix || 'Ref', v_row.receipt_ref),
                       (3, v_row.time_field,
                        pg_catalog.to_char(v_row.receipt_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
                       (4, 'eventId', v_row.event_id::text),
                       (5, 'consumerName', v_row.consumer_name),
                       (6, 'eventEnvelopeSha256', v_row.event_envelope_sha256),
                       (7, 'destination', v_row.destination)) AS c(ord, member, stored)
         WHERE (v_doc ->> c.member) IS DISTINCT FROM c.stored;
        IF v_member IS NOT NULL THEN
            problem := 'column_mismatch: ' || v_member;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$function$;

COMMENT ON FUNCTION inbox.verify_receipt_digests(integer) IS
    'Audit sweep: stored receipts whose text is not canonical, whose digest the database''s own canonicalizer does not reproduce, or whose members differ from their columns (SPEC D-2, R-CO-1). Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION inbox.verify_receipt_digests(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.verify_receipt_digests(integer) TO outbox_auditor;
