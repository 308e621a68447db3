-- The triggers of outbox.kernel_settings. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_kernel_settings__no_delete BEFORE DELETE ON outbox.kernel_settings FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_kernel_settings__no_truncate BEFORE TRUNCATE ON outbox.kernel_settings FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
