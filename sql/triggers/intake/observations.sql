-- The triggers of intake.observations. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   intake.tg_observations__fanout
--   intake.tg_observations__purge_delete
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_observations__delete_guarded BEFORE DELETE ON intake.observations FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.purge_observation_payloads(interval,integer)');
CREATE OR REPLACE TRIGGER tg_observations__fanout AFTER INSERT ON intake.observations REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_observations__fanout();
CREATE OR REPLACE TRIGGER tg_observations__insert_guarded BEFORE INSERT ON intake.observations FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE OR REPLACE TRIGGER tg_observations__no_truncate BEFORE TRUNCATE ON intake.observations FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observations__no_update BEFORE UPDATE ON intake.observations FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observations__purge_delete BEFORE DELETE ON intake.observations FOR EACH ROW EXECUTE FUNCTION intake.tg_observations__purge_delete();
