-- Immutability of the intake's evidence (SPEC R-OB-2, R-OB-3, R-OB-7; OB202):
--   * registries (workloads, observation schemas and members, normalization policies,
--     projectors), the id registry, purge markers, purge runs, conflict audit rows and send
--     failure reports: no UPDATE, no DELETE, no TRUNCATE, by any role (the owner included);
--   * accepted observations: no UPDATE, no TRUNCATE; a DELETE only for rows whose purge marker
--     was written by the purge run in progress in this transaction (transaction-local setting
--     pgintake.purge_run names a run that has no intake.purge_runs row yet; only
--     intake.purge_observation_payloads sets it, and only the owner can write markers).
CREATE OR REPLACE FUNCTION intake.tg_intake__immutable()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on intake.% is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'intake evidence is append-only (SPEC R-OB-2, R-OB-3, R-OB-7)';
END
$function$;

REVOKE ALL ON FUNCTION intake.tg_intake__immutable() FROM PUBLIC;
