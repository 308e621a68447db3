-- The triggers of outbox.outbox_retry_policies. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_retry_policies__history
--   outbox.tg_outbox_retry_policies__version
CREATE OR REPLACE TRIGGER tg_outbox_retry_policies__history AFTER INSERT OR DELETE OR UPDATE ON outbox.outbox_retry_policies FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policies__history();
CREATE OR REPLACE TRIGGER tg_outbox_retry_policies__no_truncate BEFORE TRUNCATE ON outbox.outbox_retry_policies FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_retry_policies__version();
CREATE OR REPLACE TRIGGER tg_outbox_retry_policies__version BEFORE UPDATE ON outbox.outbox_retry_policies FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policies__version();
