-- The triggers of intake.observation_deliveries. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
CREATE OR REPLACE TRIGGER tg_observation_deliveries__no_delete BEFORE DELETE ON intake.observation_deliveries FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_deliveries__no_truncate BEFORE TRUNCATE ON intake.observation_deliveries FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
