-- The triggers of outbox.completeness_manifests. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_archive__immutable
CREATE OR REPLACE TRIGGER tg_completeness_manifests__immutable BEFORE DELETE OR UPDATE ON outbox.completeness_manifests FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
CREATE OR REPLACE TRIGGER tg_completeness_manifests__no_truncate BEFORE TRUNCATE ON outbox.completeness_manifests FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
