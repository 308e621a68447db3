-- The triggers of outbox.completeness_two_part_proofs. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_archive__immutable
CREATE OR REPLACE TRIGGER tg_completeness_two_part_proofs__immutable BEFORE DELETE OR UPDATE ON outbox.completeness_two_part_proofs FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
CREATE OR REPLACE TRIGGER tg_completeness_two_part_proofs__no_truncate BEFORE TRUNCATE ON outbox.completeness_two_part_proofs FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
