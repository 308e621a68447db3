-- The triggers of outbox.destination_claim_pause_log. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_projection_registry__guarded
CREATE OR REPLACE TRIGGER tg_destination_claim_pause_log__append_only BEFORE DELETE OR UPDATE ON outbox.destination_claim_pause_log FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE OR REPLACE TRIGGER tg_destination_claim_pause_log__no_truncate BEFORE TRUNCATE ON outbox.destination_claim_pause_log FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
