-- The triggers of intake.observation_projectors. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   intake.tg_observation_projectors__backfill
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_observation_projectors__backfill AFTER INSERT ON intake.observation_projectors REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_observation_projectors__backfill();
CREATE OR REPLACE TRIGGER tg_observation_projectors__immutable BEFORE DELETE OR UPDATE ON intake.observation_projectors FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_projectors__insert_guarded BEFORE INSERT ON intake.observation_projectors FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_observation_projector(text,text,integer)');
CREATE OR REPLACE TRIGGER tg_observation_projectors__no_truncate BEFORE TRUNCATE ON intake.observation_projectors FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
