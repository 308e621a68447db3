-- The triggers of intake.workload_minutes. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_workload_minutes__no_delete BEFORE DELETE ON intake.workload_minutes FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_workload_minutes__no_truncate BEFORE TRUNCATE ON intake.workload_minutes FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_workload_minutes__writers BEFORE INSERT OR UPDATE ON intake.workload_minutes FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
