-- Archive immutability (SPEC R-RT-1, R-RT-3, R-RT-4, R-BS-4): the archive tables, the archive run
-- audit rows and their skip reports, and the bootstrap evidence are written once and never
-- changed: UPDATE, DELETE and TRUNCATE raise OB202 for every role, the owner included.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_archive__immutable()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on outbox.% is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'OB202', DETAIL = 'archive and evidence rows are written once and never changed or deleted';
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_archive__immutable() IS
    'Trigger: archive, archive-run and bootstrap evidence tables are append-only; UPDATE/DELETE/TRUNCATE raise OB202 (SPEC R-RT-3, R-RT-4).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_archive__immutable() FROM PUBLIC;
