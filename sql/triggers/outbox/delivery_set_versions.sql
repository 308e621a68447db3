-- The triggers of outbox.delivery_set_versions. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_delivery_set_versions__register_projections
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_delivery_set_versions__immutable BEFORE DELETE OR UPDATE ON outbox.delivery_set_versions FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_delivery_set_versions__no_truncate BEFORE TRUNCATE ON outbox.delivery_set_versions FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_delivery_set_versions__register_projections AFTER UPDATE OF status ON outbox.delivery_set_versions FOR EACH ROW WHEN (new.status = 'active'::text AND old.status IS DISTINCT FROM 'active'::text) EXECUTE FUNCTION outbox.tg_delivery_set_versions__register_projections();
