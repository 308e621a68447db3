-- The triggers of outbox.receipt_kind_members. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_receipt_kind_members__immutable BEFORE DELETE OR UPDATE ON outbox.receipt_kind_members FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_receipt_kind_members__no_truncate BEFORE TRUNCATE ON outbox.receipt_kind_members FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
