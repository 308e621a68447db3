-- Immutability of the intake's evidence (SPEC R-OB-2, R-OB-3, R-OB-7; OB202):
--   * registries (workloads, observation schemas and members, normalization policies,
--     projectors), the id registry, purge markers, purge runs, conflict audit rows and send
--     failure reports: no UPDATE, no DELETE, no TRUNCATE, by any role (the owner included);
--   * accepted observations: no UPDATE, no TRUNCATE; a DELETE only for rows whose purge marker
--     was written by the purge run in progress in this transaction (transaction-local setting
--     pgintake.purge_run names a run that has no intake.purge_runs row yet; only
--     intake.purge_observation_payloads sets it, and only the owner can write markers).
CREATE FUNCTION intake.tg_intake__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on intake.% is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'intake evidence is append-only (SPEC R-OB-2, R-OB-3, R-OB-7)';
END
$fn$;
REVOKE ALL ON FUNCTION intake.tg_intake__immutable() FROM PUBLIC;

CREATE FUNCTION intake.tg_observations__purge_delete() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_run text := coalesce(pg_catalog.current_setting('pgintake.purge_run', true), '');
BEGIN
    IF v_run ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
       AND NOT EXISTS (SELECT 1 FROM intake.purge_runs r WHERE r.run_id = v_run::uuid)
       AND EXISTS (SELECT 1 FROM intake.observation_purge_markers m
                   WHERE m.observation_id = OLD.observation_id AND m.run_id = v_run::uuid) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'immutability violation: DELETE on intake.observations is not allowed'
        USING ERRCODE = 'OB202',
              DETAIL = 'an accepted observation leaves only through intake.purge_observation_payloads, which writes its purge marker first';
END
$fn$;
REVOKE ALL ON FUNCTION intake.tg_observations__purge_delete() FROM PUBLIC;

DO $tg$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['workloads', 'observation_schemas', 'observation_schema_members',
                                   'normalization_policies', 'observation_projectors', 'observation_ids',
                                   'observation_purge_markers', 'purge_runs', 'observation_conflicts',
                                   'send_failures']
    LOOP
        EXECUTE pg_catalog.format('CREATE TRIGGER tg_%1$s__immutable BEFORE UPDATE OR DELETE ON intake.%1$I
                                   FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable()', v_table);
        EXECUTE pg_catalog.format('CREATE TRIGGER tg_%1$s__no_truncate BEFORE TRUNCATE ON intake.%1$I
                                   FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable()', v_table);
    END LOOP;
END
$tg$;

CREATE TRIGGER tg_observations__no_update BEFORE UPDATE ON intake.observations
    FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_observations__no_truncate BEFORE TRUNCATE ON intake.observations
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_observations__purge_delete BEFORE DELETE ON intake.observations
    FOR EACH ROW EXECUTE FUNCTION intake.tg_observations__purge_delete();

-- The observation projector's receipts are append-only like inbox.inbox_receipts (R-OB-4).
CREATE TRIGGER tg_observation_receipts__immutable BEFORE UPDATE OR DELETE ON inbox.observation_receipts
    FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_observation_receipts__no_truncate BEFORE TRUNCATE ON inbox.observation_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();
