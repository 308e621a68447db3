-- The triggers of intake.observation_schema_members. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
CREATE OR REPLACE TRIGGER tg_observation_schema_members__immutable BEFORE DELETE OR UPDATE ON intake.observation_schema_members FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_schema_members__no_truncate BEFORE TRUNCATE ON intake.observation_schema_members FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
