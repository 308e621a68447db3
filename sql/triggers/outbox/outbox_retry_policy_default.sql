-- The triggers of outbox.outbox_retry_policy_default. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_retry_policies__history
--   outbox.tg_outbox_retry_policies__version
--   outbox.tg_outbox_retry_policy_default__keep
CREATE OR REPLACE TRIGGER tg_outbox_retry_policy_default__history AFTER INSERT OR UPDATE ON outbox.outbox_retry_policy_default FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policies__history();
CREATE OR REPLACE TRIGGER tg_outbox_retry_policy_default__keep BEFORE DELETE ON outbox.outbox_retry_policy_default FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policy_default__keep();
CREATE OR REPLACE TRIGGER tg_outbox_retry_policy_default__no_truncate BEFORE TRUNCATE ON outbox.outbox_retry_policy_default FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_retry_policy_default__keep();
CREATE OR REPLACE TRIGGER tg_outbox_retry_policy_default__version BEFORE UPDATE ON outbox.outbox_retry_policy_default FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policies__version();
