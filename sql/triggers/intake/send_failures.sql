-- The triggers of intake.send_failures. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_send_failures__immutable BEFORE DELETE OR UPDATE ON intake.send_failures FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_send_failures__insert_guarded BEFORE INSERT ON intake.send_failures FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.record_send_failures(integer,timestamp with time zone,timestamp with time zone,text)');
CREATE OR REPLACE TRIGGER tg_send_failures__no_truncate BEFORE TRUNCATE ON intake.send_failures FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
