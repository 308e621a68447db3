-- The triggers of outbox.outbox_retry_policy_history. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_retry_policy_history__append_only
CREATE OR REPLACE TRIGGER tg_outbox_retry_policy_history__append_only BEFORE DELETE OR UPDATE ON outbox.outbox_retry_policy_history FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policy_history__append_only();
CREATE OR REPLACE TRIGGER tg_outbox_retry_policy_history__append_only_truncate BEFORE TRUNCATE ON outbox.outbox_retry_policy_history FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_retry_policy_history__append_only();
