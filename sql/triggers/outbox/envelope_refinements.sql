-- The triggers of outbox.envelope_refinements. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_registry__immutable
CREATE OR REPLACE TRIGGER tg_envelope_refinements__immutable BEFORE DELETE OR UPDATE ON outbox.envelope_refinements FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE OR REPLACE TRIGGER tg_envelope_refinements__no_truncate BEFORE TRUNCATE ON outbox.envelope_refinements FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
