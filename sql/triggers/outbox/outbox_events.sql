-- The triggers of outbox.outbox_events. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_events__delivery_set_complete
--   outbox.tg_outbox_events__immutable
--   outbox.tg_outbox_hot__retention_delete
CREATE OR REPLACE TRIGGER tg_outbox_events__delivery_set_complete AFTER INSERT ON outbox.outbox_events REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_events__delivery_set_complete();
CREATE OR REPLACE TRIGGER tg_outbox_events__immutable BEFORE UPDATE ON outbox.outbox_events FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_events__immutable();
CREATE OR REPLACE TRIGGER tg_outbox_events__no_truncate BEFORE TRUNCATE ON outbox.outbox_events FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_events__immutable();
CREATE OR REPLACE TRIGGER tg_outbox_events__retention_copied AFTER DELETE ON outbox.outbox_events REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete();
CREATE OR REPLACE TRIGGER tg_outbox_events__retention_delete BEFORE DELETE ON outbox.outbox_events FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete();
