-- The triggers of intake.observation_purge_markers. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_observation_purge_markers__immutable BEFORE DELETE OR UPDATE ON intake.observation_purge_markers FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_purge_markers__insert_guarded BEFORE INSERT ON intake.observation_purge_markers FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.purge_observation_payloads(interval,integer)');
CREATE OR REPLACE TRIGGER tg_observation_purge_markers__no_truncate BEFORE TRUNCATE ON intake.observation_purge_markers FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
