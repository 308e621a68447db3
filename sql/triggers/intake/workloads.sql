-- The triggers of intake.workloads. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_workloads__immutable BEFORE DELETE OR UPDATE ON intake.workloads FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_workloads__insert_guarded BEFORE INSERT ON intake.workloads FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_workload(name,text,text,text,integer,integer,text)');
CREATE OR REPLACE TRIGGER tg_workloads__no_truncate BEFORE TRUNCATE ON intake.workloads FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
