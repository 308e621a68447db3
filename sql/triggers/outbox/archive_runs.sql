-- The triggers of outbox.archive_runs. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_archive__immutable
CREATE OR REPLACE TRIGGER tg_archive_runs__immutable BEFORE DELETE OR UPDATE OR TRUNCATE ON outbox.archive_runs FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
