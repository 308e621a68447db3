-- The triggers of outbox.outbox_append_proofs. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_append_proofs__check
DROP TRIGGER IF EXISTS tg_outbox_append_proofs__check ON outbox.outbox_append_proofs;
CREATE CONSTRAINT TRIGGER tg_outbox_append_proofs__check AFTER INSERT ON outbox.outbox_append_proofs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (new.queues_proof) EXECUTE FUNCTION outbox.tg_outbox_append_proofs__check();
