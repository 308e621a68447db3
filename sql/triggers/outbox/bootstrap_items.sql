-- The triggers of outbox.bootstrap_items. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_archive__immutable
CREATE OR REPLACE TRIGGER tg_bootstrap_items__immutable BEFORE DELETE OR UPDATE OR TRUNCATE ON outbox.bootstrap_items FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
