-- The triggers of inbox.inbox_revision_progress. Their functions (sql/functions/<schema>/<function>.sql):
--   inbox.tg_inbox_revision_progress__monotonic
CREATE OR REPLACE TRIGGER tg_inbox_revision_progress__monotonic BEFORE DELETE OR UPDATE ON inbox.inbox_revision_progress FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_revision_progress__monotonic();
CREATE OR REPLACE TRIGGER tg_inbox_revision_progress__monotonic_truncate BEFORE TRUNCATE ON inbox.inbox_revision_progress FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_revision_progress__monotonic();
