-- The triggers of outbox.projection_row_sources. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_projection_row_sources__immutable BEFORE DELETE OR UPDATE ON outbox.projection_row_sources FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
