-- The triggers of inbox.consumer_roles. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_consumer_roles__immutable BEFORE DELETE OR UPDATE ON inbox.consumer_roles FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_consumer_roles__no_truncate BEFORE TRUNCATE ON inbox.consumer_roles FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
