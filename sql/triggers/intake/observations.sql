-- The triggers of intake.observations. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   intake.tg_observations__fanout
--   intake.tg_observations__purge_delete
CREATE OR REPLACE TRIGGER tg_observations__fanout AFTER INSERT ON intake.observations REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_observations__fanout();
CREATE OR REPLACE TRIGGER tg_observations__no_truncate BEFORE TRUNCATE ON intake.observations FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observations__no_update BEFORE UPDATE ON intake.observations FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observations__purge_delete BEFORE DELETE ON intake.observations FOR EACH ROW EXECUTE FUNCTION intake.tg_observations__purge_delete();
