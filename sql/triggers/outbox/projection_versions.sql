-- The triggers of outbox.projection_versions. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_kernel_dml__guarded
--   outbox.tg_projection_registry__guarded
--   outbox.tg_projection_versions__history
CREATE OR REPLACE TRIGGER tg_projection_versions__guarded BEFORE DELETE OR UPDATE ON outbox.projection_versions FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_projection_versions__history AFTER INSERT OR UPDATE OF state ON outbox.projection_versions FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_versions__history();
CREATE OR REPLACE TRIGGER tg_projection_versions__insert_guarded BEFORE INSERT ON outbox.projection_versions FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.register_projection_version(text,integer,text)', 'outbox.tg_delivery_set_versions__register_projections()');
CREATE OR REPLACE TRIGGER tg_projection_versions__no_truncate BEFORE TRUNCATE ON outbox.projection_versions FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_projection_versions__update_guarded BEFORE UPDATE ON outbox.projection_versions FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.start_shadow_build(text,integer)', 'outbox.freeze_cutover_candidate(uuid,uuid)', 'outbox.retire_projection_version(text,integer)', 'outbox.cutover_projection(uuid,uuid,integer,integer,text,text)');
