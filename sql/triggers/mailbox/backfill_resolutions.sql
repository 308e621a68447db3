-- The triggers of mailbox.backfill_resolutions. Their functions (sql/functions/<schema>/<function>.sql):
--   mailbox.tg_mailbox_backfill_resolutions__append_only
CREATE OR REPLACE TRIGGER tg_mailbox_backfill_resolutions__append_only BEFORE DELETE OR UPDATE ON mailbox.backfill_resolutions FOR EACH ROW EXECUTE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only();
CREATE OR REPLACE TRIGGER tg_mailbox_backfill_resolutions__append_only_truncate BEFORE TRUNCATE ON mailbox.backfill_resolutions FOR EACH STATEMENT EXECUTE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only();
