-- Archive immutability (SPEC R-RT-1, R-RT-3, R-RT-4, R-BS-4): the archive tables, the archive run
-- audit rows and their skip reports, and the bootstrap evidence are written once and never
-- changed: UPDATE, DELETE and TRUNCATE raise OB202 for every role, the owner included.
CREATE FUNCTION outbox.tg_outbox_archive__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on outbox.% is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'OB202', DETAIL = 'archive and evidence rows are written once and never changed or deleted';
END
$fn$;
COMMENT ON FUNCTION outbox.tg_outbox_archive__immutable() IS
    'Trigger: archive, archive-run and bootstrap evidence tables are append-only; UPDATE/DELETE/TRUNCATE raise OB202 (SPEC R-RT-3, R-RT-4).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_archive__immutable() FROM PUBLIC;

-- Statement-level: refused before any row is touched, also when no row matches.
DO $triggers$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['archived_events', 'archived_deliveries', 'archived_attempt_starts',
                                   'archived_attempt_finishes', 'archived_quarantine', 'archive_runs',
                                   'archive_run_skips', 'bootstrap_runs', 'bootstrap_items']
    LOOP
        EXECUTE pg_catalog.format(
            'CREATE TRIGGER %I BEFORE UPDATE OR DELETE OR TRUNCATE ON outbox.%I FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable()',
            'tg_' || v_table || '__immutable', v_table);
    END LOOP;
END
$triggers$;
