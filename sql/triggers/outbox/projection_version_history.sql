-- The triggers of outbox.projection_version_history. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_kernel_dml__guarded
--   outbox.tg_projection_registry__guarded
CREATE OR REPLACE TRIGGER tg_projection_version_history__append_only BEFORE DELETE OR UPDATE ON outbox.projection_version_history FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_projection_version_history__insert_guarded BEFORE INSERT ON outbox.projection_version_history FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.tg_projection_versions__history()');
CREATE OR REPLACE TRIGGER tg_projection_version_history__no_truncate BEFORE TRUNCATE ON outbox.projection_version_history FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
