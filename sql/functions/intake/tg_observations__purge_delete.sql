-- Immutability of the intake's evidence (SPEC R-OB-2, R-OB-3, R-OB-7; OB202):
--   * registries (workloads, observation schemas and members, normalization policies,
--     projectors), the id registry, purge markers, purge runs, conflict audit rows and send
--     failure reports: no UPDATE, no DELETE, no TRUNCATE, by any role (the owner included);
--   * accepted observations: no UPDATE, no TRUNCATE; a DELETE only for rows whose purge marker
--     was written by the purge run in progress in this transaction (transaction-local setting
--     pgintake.purge_run names a run that has no intake.purge_runs row yet; only
--     intake.purge_observation_payloads sets it, and only the owner can write markers).
CREATE OR REPLACE FUNCTION intake.tg_observations__purge_delete()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the statement-level guard (tg_observations__delete_guarded) admits only the purge
    -- function's delete; each row must also have its purge marker (written first, same run)
    IF EXISTS (SELECT 1 FROM intake.observation_purge_markers AS m WHERE m.observation_id = OLD.observation_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'immutability violation: DELETE on intake.observations is not allowed'
        USING ERRCODE = 'OB202',
              DETAIL = 'an accepted observation leaves only through intake.purge_observation_payloads, which writes its purge marker first';
END
$function$;

REVOKE ALL ON FUNCTION intake.tg_observations__purge_delete() FROM PUBLIC;
