-- The triggers of outbox.archive_run_skips. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_archive__immutable
CREATE OR REPLACE TRIGGER tg_archive_run_skips__immutable BEFORE DELETE OR UPDATE OR TRUNCATE ON outbox.archive_run_skips FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
