-- The triggers of outbox.projection_builds. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_projection_registry__guarded
CREATE OR REPLACE TRIGGER tg_projection_builds__guarded BEFORE DELETE OR UPDATE ON outbox.projection_builds FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_projection_builds__no_truncate BEFORE TRUNCATE ON outbox.projection_builds FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
