CREATE OR REPLACE FUNCTION outbox.register_envelope_refinement(p_event_type text, p_event_schema_version text, p_required_members text[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_problem text;
    v_have    text[];
    v_want    text[];
BEGIN
    v_problem := CASE
        WHEN p_event_type IS NULL OR p_event_type !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_event_type) > 200
          OR p_event_schema_version IS NULL OR p_event_schema_version !~ '^[a-z0-9][a-z0-9._@-]*$'
          OR pg_catalog.length(p_event_schema_version) > 200
            THEN pg_catalog.format('event type %L and schema version %L must match ^[a-z0-9][a-z0-9._@-]*$', p_event_type, p_event_schema_version)
        WHEN p_required_members IS NULL OR pg_catalog.cardinality(p_required_members) = 0
            THEN 'required_members must name at least one member'
        WHEN EXISTS (SELECT 1 FROM pg_catalog.unnest(p_required_members) AS m(m)
                      WHERE m.m IS NULL OR m.m NOT IN ('correlationId', 'causationId', 'operationId', 'projectId'))
            THEN pg_catalog.format('required_members %s: each must be correlationId, causationId, operationId or projectId', p_required_members)
        WHEN (SELECT pg_catalog.count(DISTINCT m.m) FROM pg_catalog.unnest(p_required_members) AS m(m))
             <> pg_catalog.cardinality(p_required_members)
            THEN pg_catalog.format('required_members %s names a member twice', p_required_members)
    END;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'envelope refinement invalid' USING ERRCODE = 'OB101', DETAIL = v_problem;
    END IF;

    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('outbox.envelope_refinements/' || p_event_type || '/' || p_event_schema_version, 0));
    SELECT pg_catalog.array_agg(r.required_field ORDER BY r.required_field COLLATE "C") INTO v_have
      FROM outbox.envelope_refinements AS r
     WHERE r.event_type = p_event_type AND r.event_schema_version = p_event_schema_version;
    SELECT pg_catalog.array_agg(m.m ORDER BY m.m COLLATE "C") INTO v_want FROM pg_catalog.unnest(p_required_members) AS m(m);
    IF v_have IS NULL THEN
        INSERT INTO outbox.envelope_refinements (event_type, event_schema_version, required_field)
        SELECT p_event_type, p_event_schema_version, m.m FROM pg_catalog.unnest(v_want) AS m(m);
    ELSIF v_have IS DISTINCT FROM v_want THEN
        RAISE EXCEPTION 'envelope refinement already registered differently (refinements are immutable)'
            USING ERRCODE = 'OB101',
                  DETAIL = pg_catalog.format('%s (schema %s) requires %s', p_event_type, p_event_schema_version,
                                             pg_catalog.array_to_string(v_have, ', '));
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox.register_envelope_refinement(text, text, text[]) IS
    'Insert-or-compare of an R-AP-7 envelope refinement (optional members required for one event type/schema pair); another list for the pair OB101. SPEC R-AP-7, D-1, §13.';

REVOKE ALL ON FUNCTION outbox.register_envelope_refinement(text, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_envelope_refinement(text, text, text[]) TO outbox_registrar;
