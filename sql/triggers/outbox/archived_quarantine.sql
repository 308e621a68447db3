-- The triggers of outbox.archived_quarantine. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_archive__immutable
CREATE OR REPLACE TRIGGER tg_archived_quarantine__immutable BEFORE DELETE OR UPDATE OR TRUNCATE ON outbox.archived_quarantine FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
