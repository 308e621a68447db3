CREATE OR REPLACE FUNCTION outbox.receipt_kind_catalog()
 RETURNS TABLE(receipt_kind text, receipt_type text, field_prefix text, time_field text, receipt_schema_version integer, requires_projection boolean, members jsonb)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT k.receipt_kind, k.receipt_type, k.field_prefix, k.time_field, k.receipt_schema_version,
           k.requires_projection,
           COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.-) 'receipt_kind'::text
                                                 ORDER BY m.member COLLATE "C")
                       FROM outbox.receipt_kind_members AS m
                      WHERE m.receipt_kind = k.receipt_kind), '[]'::jsonb)
      FROM outbox.receipt_kinds AS k
     ORDER BY k.receipt_kind COLLATE "C"
$function$;

COMMENT ON FUNCTION outbox.receipt_kind_catalog() IS
    'Every receipt kind (outbox.receipt_kinds) with its members (rows of outbox.receipt_kind_members minus receipt_kind, as a JSON array sorted by member): what the Go receipt kit loads at start (SPEC R-AK-1a, §13). Callers: outbox_consumer, outbox_dispatcher, outbox_registrar, outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.receipt_kind_catalog() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.receipt_kind_catalog() TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.receipt_kind_catalog() TO outbox_consumer;
GRANT EXECUTE ON FUNCTION outbox.receipt_kind_catalog() TO outbox_dispatcher;
GRANT EXECUTE ON FUNCTION outbox.receipt_kind_catalog() TO outbox_registrar;
