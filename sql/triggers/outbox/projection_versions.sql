-- The triggers of outbox.projection_versions. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_projection_registry__guarded
--   outbox.tg_projection_versions__history
CREATE OR REPLACE TRIGGER tg_projection_versions__guarded BEFORE DELETE OR UPDATE ON outbox.projection_versions FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_projection_versions__history AFTER INSERT OR UPDATE OF state ON outbox.projection_versions FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_versions__history();
CREATE OR REPLACE TRIGGER tg_projection_versions__no_truncate BEFORE TRUNCATE ON outbox.projection_versions FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
