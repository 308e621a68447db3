-- The triggers of inbox.observation_receipts. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
CREATE OR REPLACE TRIGGER tg_observation_receipts__immutable BEFORE DELETE OR UPDATE ON inbox.observation_receipts FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_receipts__no_truncate BEFORE TRUNCATE ON inbox.observation_receipts FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
