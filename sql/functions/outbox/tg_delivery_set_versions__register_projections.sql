-- R-PV-1: a delivery-set activation that introduces a projection target registers it. When
-- outbox.activate_delivery_set makes a definition active, every (projection_name,
-- projection_version) its members require whose projection has NO registered version yet is
-- registered with semantic digest 'unknown': the highest such version of a projection as
-- 'active', any lower one the same members also target as 'frozen' (both take receipts without
-- a build token, like every version live deliveries are frozen to). A projection that already
-- has versions is left alone: retargeting it to another version belongs to
-- outbox.cutover_projection (R-PV-2; activate_delivery_set refuses it outside, OB808).
-- Locking: runs inside activate_delivery_set (SHARE ROW EXCLUSIVE on delivery_set_versions);
--   the insert takes the projection_versions primary key (ON CONFLICT DO NOTHING).
-- Caller: trigger function, granted to nobody.
CREATE OR REPLACE FUNCTION outbox.tg_delivery_set_versions__register_projections()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    INSERT INTO outbox.projection_versions (projection_name, projection_version, semantic_definition_sha256, state)
    SELECT t.projection_name, t.projection_version, 'unknown',
           CASE WHEN t.projection_version = max(t.projection_version) OVER (PARTITION BY t.projection_name)
                THEN 'active' ELSE 'frozen' END
      FROM (SELECT DISTINCT m.projection_name, m.projection_version
              FROM outbox.delivery_set_members AS m
             WHERE m.delivery_set_version = NEW.delivery_set_version
               AND m.definition_schema_version = NEW.definition_schema_version
               AND m.digest_algorithm_version = NEW.digest_algorithm_version
               AND m.definition_digest = NEW.definition_digest
               AND m.projection_state = 'required') AS t
     WHERE NOT EXISTS (SELECT 1 FROM outbox.projection_versions AS v WHERE v.projection_name = t.projection_name)
     ORDER BY t.projection_name, t.projection_version
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_delivery_set_versions__register_projections() FROM PUBLIC;
