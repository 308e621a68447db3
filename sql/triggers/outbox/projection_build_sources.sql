-- The triggers of outbox.projection_build_sources. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_kernel_dml__guarded
--   outbox.tg_projection_registry__guarded
CREATE OR REPLACE TRIGGER tg_projection_build_sources__append_only BEFORE DELETE OR UPDATE ON outbox.projection_build_sources FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_projection_build_sources__insert_guarded BEFORE INSERT ON outbox.projection_build_sources FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.claim_rebuild_sources(uuid,uuid,integer)');
CREATE OR REPLACE TRIGGER tg_projection_build_sources__no_truncate BEFORE TRUNCATE ON outbox.projection_build_sources FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
