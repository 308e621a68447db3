-- inbox._inbox_receipt_kind(p_receipt jsonb) RETURNS outbox.receipt_kinds  (private helper, SPEC R-AK-1a)
-- The receipt kind of a receipt document, recognised by its field prefix: exactly one kind of
-- outbox.receipt_kinds must have <prefix>SchemaVersion or <prefix>DigestAlgorithmVersion (or any
-- other <prefix>Ref/<prefix>Digest) among the document's keys.
-- SQLSTATEs: OB002 receipt rejected (no kind, or fields of several kinds). Locking: none.
-- Caller: inbox.record_receipt (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION inbox._inbox_receipt_kind(p_receipt jsonb)
 RETURNS outbox.receipt_kinds
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_kind  outbox.receipt_kinds;
    v_count integer;
BEGIN
    SELECT pg_catalog.count(*) INTO v_count
      FROM outbox.receipt_kinds k
     WHERE p_receipt ?| ARRAY[k.field_prefix || 'Ref', k.field_prefix || 'SchemaVersion',
                              k.field_prefix || 'DigestAlgorithmVersion', k.field_prefix || 'Digest'];
    IF v_count <> 1 THEN
        RAISE EXCEPTION 'receipt rejected: cannot tell the receipt kind'
            USING ERRCODE = 'OB002',
                  DETAIL = format('the receipt must carry the <prefix>SchemaVersion/DigestAlgorithmVersion fields of exactly one registered receipt kind; found %s', v_count),
                  HINT = 'prefixes are listed in outbox.receipt_kinds.field_prefix (SPEC R-AK-1a)';
    END IF;
    SELECT k.* INTO v_kind
      FROM outbox.receipt_kinds k
     WHERE p_receipt ?| ARRAY[k.field_prefix || 'Ref', k.field_prefix || 'SchemaVersion',
                              k.field_prefix || 'DigestAlgorithmVersion', k.field_prefix || 'Digest'];
    RETURN v_kind;
END
$function$;

COMMENT ON FUNCTION inbox._inbox_receipt_kind(jsonb) IS
    'Private: the outbox.receipt_kinds row whose field prefix a receipt document uses; OB002 when none or several (SPEC R-AK-1a).';

REVOKE ALL ON FUNCTION inbox._inbox_receipt_kind(jsonb) FROM PUBLIC;
