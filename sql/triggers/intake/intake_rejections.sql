-- The triggers of intake.intake_rejections. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_intake_rejections__immutable BEFORE DELETE OR UPDATE ON intake.intake_rejections FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_intake_rejections__insert_guarded BEFORE INSERT ON intake.intake_rejections FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.accept_observations(json)');
CREATE OR REPLACE TRIGGER tg_intake_rejections__no_truncate BEFORE TRUNCATE ON intake.intake_rejections FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
