-- The triggers of intake.observation_conflicts. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_observation_conflicts__immutable BEFORE DELETE OR UPDATE ON intake.observation_conflicts FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_conflicts__insert_guarded BEFORE INSERT ON intake.observation_conflicts FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE OR REPLACE TRIGGER tg_observation_conflicts__no_truncate BEFORE TRUNCATE ON intake.observation_conflicts FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
