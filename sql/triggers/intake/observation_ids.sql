-- The triggers of intake.observation_ids. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_observation_ids__immutable BEFORE DELETE OR UPDATE ON intake.observation_ids FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_ids__insert_guarded BEFORE INSERT ON intake.observation_ids FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE OR REPLACE TRIGGER tg_observation_ids__no_truncate BEFORE TRUNCATE ON intake.observation_ids FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
