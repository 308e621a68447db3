-- The triggers of outbox.cutover_readiness_proofs. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_kernel_dml__guarded
--   outbox.tg_projection_registry__guarded
CREATE OR REPLACE TRIGGER tg_cutover_readiness_proofs__immutable BEFORE DELETE OR UPDATE ON outbox.cutover_readiness_proofs FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_cutover_readiness_proofs__insert_guarded BEFORE INSERT ON outbox.cutover_readiness_proofs FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('outbox.cutover_projection(uuid,uuid,integer,integer,text,text)');
CREATE OR REPLACE TRIGGER tg_cutover_readiness_proofs__no_truncate BEFORE TRUNCATE ON outbox.cutover_readiness_proofs FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
