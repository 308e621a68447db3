-- The triggers of intake.observation_schema_members. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_observation_schema_members__immutable BEFORE DELETE OR UPDATE ON intake.observation_schema_members FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_schema_members__insert_guarded BEFORE INSERT ON intake.observation_schema_members FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_observation_schema(text,integer,json)');
CREATE OR REPLACE TRIGGER tg_observation_schema_members__no_truncate BEFORE TRUNCATE ON intake.observation_schema_members FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
