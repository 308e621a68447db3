-- The triggers of outbox.outbox_publications. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_hot__retention_delete
--   outbox.tg_outbox_publications__guarded
CREATE OR REPLACE TRIGGER tg_outbox_publications__guarded BEFORE UPDATE ON outbox.outbox_publications FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE OR REPLACE TRIGGER tg_outbox_publications__guarded_insert AFTER INSERT ON outbox.outbox_publications REFERENCING NEW TABLE AS new_publications FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE OR REPLACE TRIGGER tg_outbox_publications__no_truncate BEFORE TRUNCATE ON outbox.outbox_publications FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE OR REPLACE TRIGGER tg_outbox_publications__retention_copied AFTER DELETE ON outbox.outbox_publications REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete();
CREATE OR REPLACE TRIGGER tg_outbox_publications__retention_delete BEFORE DELETE ON outbox.outbox_publications FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete();
