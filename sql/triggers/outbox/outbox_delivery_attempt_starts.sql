-- The triggers of outbox.outbox_delivery_attempt_starts. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_delivery_attempt_starts__append_only
--   outbox.tg_outbox_hot__retention_delete
CREATE OR REPLACE TRIGGER tg_outbox_delivery_attempt_starts__append_only BEFORE UPDATE ON outbox.outbox_delivery_attempt_starts FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only();
CREATE OR REPLACE TRIGGER tg_outbox_delivery_attempt_starts__append_only_truncate BEFORE TRUNCATE ON outbox.outbox_delivery_attempt_starts FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only();
CREATE OR REPLACE TRIGGER tg_outbox_delivery_attempt_starts__retention_copied AFTER DELETE ON outbox.outbox_delivery_attempt_starts REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete();
CREATE OR REPLACE TRIGGER tg_outbox_delivery_attempt_starts__retention_delete BEFORE DELETE ON outbox.outbox_delivery_attempt_starts FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete();
