-- The triggers of intake.send_failures. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
CREATE OR REPLACE TRIGGER tg_send_failures__immutable BEFORE DELETE OR UPDATE ON intake.send_failures FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_send_failures__no_truncate BEFORE TRUNCATE ON intake.send_failures FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
