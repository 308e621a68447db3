-- The triggers of outbox.delivery_destinations. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_delivery_destinations__immutable BEFORE DELETE OR UPDATE ON outbox.delivery_destinations FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_delivery_destinations__no_truncate BEFORE TRUNCATE ON outbox.delivery_destinations FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
