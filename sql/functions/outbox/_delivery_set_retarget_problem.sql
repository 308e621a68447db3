-- outbox._delivery_set_retarget_problem(p_delivery_set_version integer, p_definition_schema_version
--   integer, p_digest_algorithm_version text, p_definition_digest text, p_as_active_name text,
--   p_as_active_version integer) RETURNS text  (private helper, SPEC §11b R-PV-2, OB808)
-- The first projection the registered definition would retarget, as text (NULL: none). For
-- every projection its required members target that has registered versions, the highest
-- targeted version must be the active one and every targeted version active or frozen (several
-- versions of one projection in one set: the highest active, as the migration registers them).
-- p_as_active_name/_version: judge that projection as if that version were active (what
-- outbox.cutover_projection checks before it switches the pointer); NULL: the registry as it is.
-- Projections without versions are not judged (the activation registers them, R-PV-1).
-- Locking: none (reads). Caller: activate_delivery_set, cutover_projection; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._delivery_set_retarget_problem(p_delivery_set_version integer, p_definition_schema_version integer, p_digest_algorithm_version text, p_definition_digest text, p_as_active_name text, p_as_active_version integer)
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT pg_catalog.format('%s: targets version(s) %s, the active version is %s', t.projection_name,
                             pg_catalog.array_to_string(t.versions, ','), coalesce(t.active::text, 'none'))
      FROM (SELECT m.projection_name,
                   pg_catalog.array_agg(DISTINCT m.projection_version ORDER BY m.projection_version) AS versions,
                   max(m.projection_version) AS top,
                   CASE WHEN m.projection_name = p_as_active_name THEN p_as_active_version
                        ELSE (SELECT a.projection_version FROM outbox.projection_versions AS a
                               WHERE a.projection_name = m.projection_name AND a.state = 'active') END AS active,
                   bool_and(m.projection_name = p_as_active_name AND m.projection_version = p_as_active_version
                            OR EXISTS (SELECT 1 FROM outbox.projection_versions AS v
                                        WHERE v.projection_name = m.projection_name AND v.projection_version = m.projection_version
                                          AND v.state IN ('active', 'frozen'))) AS all_serving
              FROM outbox.delivery_set_members AS m
             WHERE m.delivery_set_version = p_delivery_set_version
               AND m.definition_schema_version = p_definition_schema_version
               AND m.digest_algorithm_version = p_digest_algorithm_version
               AND m.definition_digest = p_definition_digest
               AND m.projection_state = 'required'
               AND EXISTS (SELECT 1 FROM outbox.projection_versions AS r WHERE r.projection_name = m.projection_name)
             GROUP BY m.projection_name) AS t
     WHERE t.top IS DISTINCT FROM t.active OR NOT t.all_serving
     ORDER BY t.projection_name
     LIMIT 1
$function$;

COMMENT ON FUNCTION outbox._delivery_set_retarget_problem(integer, integer, text, text, text, integer) IS
    'Private: the first versioned projection a registered delivery-set definition would retarget (highest target not the active version, or a target neither active nor frozen), or NULL. SPEC R-PV-2, OB808.';

REVOKE ALL ON FUNCTION outbox._delivery_set_retarget_problem(integer, integer, text, text, text, integer) FROM PUBLIC;
