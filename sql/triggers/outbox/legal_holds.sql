-- The triggers of outbox.legal_holds. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_legal_holds__release_only
CREATE OR REPLACE TRIGGER tg_outbox_legal_holds__no_delete BEFORE DELETE OR TRUNCATE ON outbox.legal_holds FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_legal_holds__release_only();
CREATE OR REPLACE TRIGGER tg_outbox_legal_holds__release_only BEFORE UPDATE ON outbox.legal_holds FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_legal_holds__release_only();
