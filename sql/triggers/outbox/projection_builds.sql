-- The triggers of outbox.projection_builds. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_kernel_dml__guarded
--   outbox.tg_projection_registry__guarded
CREATE OR REPLACE TRIGGER tg_projection_builds__guarded BEFORE DELETE OR UPDATE ON outbox.projection_builds FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_projection_builds__insert_guarded BEFORE INSERT ON outbox.projection_builds FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.start_shadow_build(text,integer)');
CREATE OR REPLACE TRIGGER tg_projection_builds__no_truncate BEFORE TRUNCATE ON outbox.projection_builds FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_projection_builds__update_guarded BEFORE UPDATE ON outbox.projection_builds FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.start_shadow_build(text,integer)', 'outbox.claim_rebuild_sources(uuid,uuid,integer)', 'outbox.freeze_cutover_candidate(uuid,uuid)', 'outbox.retire_projection_version(text,integer)', 'outbox.cutover_projection(uuid,uuid,integer,integer,text,text)');
