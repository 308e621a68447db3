-- The triggers of outbox.outbox_recoveries. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_recoveries__append_only
CREATE OR REPLACE TRIGGER tg_outbox_recoveries__append_only BEFORE DELETE OR UPDATE ON outbox.outbox_recoveries FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_recoveries__append_only();
CREATE OR REPLACE TRIGGER tg_outbox_recoveries__append_only_truncate BEFORE TRUNCATE ON outbox.outbox_recoveries FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_recoveries__append_only();
CREATE OR REPLACE TRIGGER tg_outbox_recoveries__stamp BEFORE INSERT ON outbox.outbox_recoveries FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_recoveries__append_only();
