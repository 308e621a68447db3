-- The triggers of mailbox.messages. Their functions (sql/functions/<schema>/<function>.sql):
--   mailbox.tg_mailbox_messages__terminal_immutable
CREATE OR REPLACE TRIGGER tg_mailbox_messages__terminal_immutable BEFORE DELETE OR UPDATE ON mailbox.messages FOR EACH ROW EXECUTE FUNCTION mailbox.tg_mailbox_messages__terminal_immutable();
CREATE OR REPLACE TRIGGER tg_mailbox_messages__terminal_immutable_truncate BEFORE TRUNCATE ON mailbox.messages FOR EACH STATEMENT EXECUTE FUNCTION mailbox.tg_mailbox_messages__terminal_immutable();
