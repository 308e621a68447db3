-- The triggers of outbox.archived_attempt_finishes. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_archive__immutable
CREATE OR REPLACE TRIGGER tg_archived_attempt_finishes__immutable BEFORE DELETE OR UPDATE OR TRUNCATE ON outbox.archived_attempt_finishes FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
