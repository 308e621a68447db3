-- The triggers of intake.purge_runs. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_purge_runs__immutable BEFORE DELETE OR UPDATE ON intake.purge_runs FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_purge_runs__insert_guarded BEFORE INSERT ON intake.purge_runs FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.purge_observation_payloads(interval,integer)');
CREATE OR REPLACE TRIGGER tg_purge_runs__no_truncate BEFORE TRUNCATE ON intake.purge_runs FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
