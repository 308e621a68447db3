-- The triggers of outbox.delivery_set_applicable_events. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_delivery_set_applicable_events__immutable BEFORE DELETE OR UPDATE ON outbox.delivery_set_applicable_events FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_delivery_set_applicable_events__no_truncate BEFORE TRUNCATE ON outbox.delivery_set_applicable_events FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
