-- The triggers of outbox.bootstrap_runs. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_archive__immutable
CREATE OR REPLACE TRIGGER tg_bootstrap_runs__immutable BEFORE DELETE OR UPDATE OR TRUNCATE ON outbox.bootstrap_runs FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
