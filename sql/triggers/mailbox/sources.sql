-- The triggers of mailbox.sources. Their functions (sql/functions/<schema>/<function>.sql):
--   mailbox.tg_mailbox_sources__watermark_monotonic
CREATE OR REPLACE TRIGGER tg_mailbox_sources__watermark_monotonic BEFORE DELETE OR UPDATE ON mailbox.sources FOR EACH ROW EXECUTE FUNCTION mailbox.tg_mailbox_sources__watermark_monotonic();
CREATE OR REPLACE TRIGGER tg_mailbox_sources__watermark_monotonic_truncate BEFORE TRUNCATE ON mailbox.sources FOR EACH STATEMENT EXECUTE FUNCTION mailbox.tg_mailbox_sources__watermark_monotonic();
