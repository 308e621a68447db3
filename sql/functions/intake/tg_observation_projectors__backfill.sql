-- Work rows of the observation projectors (SPEC R-OB-4): every accepted observation gets one
-- intake.observation_deliveries row per registered projector consumer (a consumer registered
-- for several projections or versions gets one row: its ack needs every one of their receipts).
--   * AFTER INSERT ON intake.observations, per statement (transition table): one INSERT ...
--     SELECT for all the rows the accepting statement inserted (HP-1: no per-row trigger);
--   * AFTER INSERT ON intake.observation_projectors, per statement: a new consumer's backfill.
--     It first takes SHARE on intake.observations, which waits for the accepts in flight to
--     commit and holds new ones back until this transaction ends, so no observation is accepted
--     between "the accept read the projectors" and "the backfill read the observations" (READ
--     COMMITTED: the backfill statement takes its snapshot after the lock).
--     The backfill covers the observations whose payload is still there: one purged before the
--     consumer registered cannot be projected any more and is not its work.
-- ON CONFLICT DO NOTHING: a consumer that registers a second projection has its rows already.
CREATE OR REPLACE FUNCTION intake.tg_observation_projectors__backfill()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    LOCK TABLE intake.observations IN SHARE MODE;
    INSERT INTO intake.observation_deliveries (consumer_name, observation_id, accepted_at)
    SELECT c.consumer_name, i.observation_id, i.accepted_at
      FROM (SELECT DISTINCT n.consumer_name FROM new_rows AS n) AS c
     CROSS JOIN intake.observations AS i
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$function$;

REVOKE ALL ON FUNCTION intake.tg_observation_projectors__backfill() FROM PUBLIC;
