-- The triggers of intake.observation_deliveries. Their functions (sql/functions/<schema>/<function>.sql):
--   intake.tg_intake__immutable
--   outbox.tg_kernel_dml__guarded
CREATE OR REPLACE TRIGGER tg_observation_deliveries__insert_guarded BEFORE INSERT ON intake.observation_deliveries FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.tg_observations__fanout()', 'intake.tg_observation_projectors__backfill()');
CREATE OR REPLACE TRIGGER tg_observation_deliveries__no_delete BEFORE DELETE ON intake.observation_deliveries FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_deliveries__no_truncate BEFORE TRUNCATE ON intake.observation_deliveries FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE OR REPLACE TRIGGER tg_observation_deliveries__update_guarded BEFORE UPDATE ON intake.observation_deliveries FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_kernel_dml__guarded('intake.claim_observations(text,text,integer,interval)', 'intake.ack_observations(json)');
