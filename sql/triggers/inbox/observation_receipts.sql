-- The triggers of inbox.observation_receipts. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_observation_receipts__immutable BEFORE DELETE OR UPDATE ON inbox.observation_receipts FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_receipts__insert_guarded BEFORE INSERT ON inbox.observation_receipts FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('inbox.record_observation_receipt(text,text,integer,uuid,text)');
CREATE OR REPLACE TRIGGER tg_observation_receipts__no_truncate BEFORE TRUNCATE ON inbox.observation_receipts FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
