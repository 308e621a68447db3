-- The triggers of inbox.inbox_receipts. Their functions (sql/functions/<schema>/<function>.sql):
--   inbox.tg_inbox_receipts__append_only
CREATE OR REPLACE TRIGGER tg_inbox_receipts__append_only BEFORE DELETE OR UPDATE ON inbox.inbox_receipts FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_receipts__append_only();
CREATE OR REPLACE TRIGGER tg_inbox_receipts__append_only_truncate BEFORE TRUNCATE ON inbox.inbox_receipts FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_receipts__append_only();
