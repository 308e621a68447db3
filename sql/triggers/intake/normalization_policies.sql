-- The triggers of intake.normalization_policies. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
CREATE OR REPLACE TRIGGER tg_normalization_policies__immutable BEFORE DELETE OR UPDATE ON intake.normalization_policies FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_normalization_policies__no_truncate BEFORE TRUNCATE ON intake.normalization_policies FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
