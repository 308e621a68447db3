-- The triggers of outbox.receipt_kinds. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_receipt_kinds__immutable BEFORE DELETE OR UPDATE ON outbox.receipt_kinds FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_receipt_kinds__no_truncate BEFORE TRUNCATE ON outbox.receipt_kinds FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
