-- The triggers of outbox.cutover_boundaries. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_kernel_dml__guarded
--   outbox.tg_projection_registry__guarded
CREATE OR REPLACE TRIGGER tg_cutover_boundaries__immutable BEFORE DELETE OR UPDATE ON outbox.cutover_boundaries FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_cutover_boundaries__insert_guarded BEFORE INSERT ON outbox.cutover_boundaries FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.freeze_cutover_candidate(uuid,uuid)');
CREATE OR REPLACE TRIGGER tg_cutover_boundaries__no_truncate BEFORE TRUNCATE ON outbox.cutover_boundaries FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
