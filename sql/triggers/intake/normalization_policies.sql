-- The triggers of intake.normalization_policies. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_normalization_policies__immutable BEFORE DELETE OR UPDATE ON intake.normalization_policies FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_normalization_policies__insert_guarded BEFORE INSERT ON intake.normalization_policies FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.register_normalization_policy(text,text,text[])');
CREATE OR REPLACE TRIGGER tg_normalization_policies__no_truncate BEFORE TRUNCATE ON intake.normalization_policies FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
