-- The triggers of outbox.cutover_boundary_members. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_kernel_dml__guarded
--   outbox.tg_projection_registry__guarded
CREATE OR REPLACE TRIGGER tg_cutover_boundary_members__immutable BEFORE DELETE OR UPDATE ON outbox.cutover_boundary_members FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_cutover_boundary_members__insert_guarded BEFORE INSERT ON outbox.cutover_boundary_members FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.freeze_cutover_candidate(uuid,uuid)');
CREATE OR REPLACE TRIGGER tg_cutover_boundary_members__no_truncate BEFORE TRUNCATE ON outbox.cutover_boundary_members FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
