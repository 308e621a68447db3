-- The triggers of outbox.error_codes. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_error_codes__immutable BEFORE DELETE OR UPDATE ON outbox.error_codes FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_error_codes__no_truncate BEFORE TRUNCATE ON outbox.error_codes FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
