-- The triggers of outbox.outbox_quarantine. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_hot__retention_delete
--   outbox.tg_outbox_quarantine__append_only
CREATE OR REPLACE TRIGGER tg_outbox_quarantine__append_only BEFORE UPDATE ON outbox.outbox_quarantine FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();
CREATE OR REPLACE TRIGGER tg_outbox_quarantine__append_only_truncate BEFORE TRUNCATE ON outbox.outbox_quarantine FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();
CREATE OR REPLACE TRIGGER tg_outbox_quarantine__retention_copied AFTER DELETE ON outbox.outbox_quarantine REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete();
CREATE OR REPLACE TRIGGER tg_outbox_quarantine__retention_delete BEFORE DELETE ON outbox.outbox_quarantine FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete();
