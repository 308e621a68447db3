-- The triggers of inbox.inbox_revision_gaps. Their functions (sql/functions/<schema>/<function>.sql):
--   inbox.tg_inbox_revision_gaps__closed_immutable
CREATE OR REPLACE TRIGGER tg_inbox_revision_gaps__closed_immutable BEFORE DELETE OR UPDATE ON inbox.inbox_revision_gaps FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();
CREATE OR REPLACE TRIGGER tg_inbox_revision_gaps__closed_immutable_truncate BEFORE TRUNCATE ON inbox.inbox_revision_gaps FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();
