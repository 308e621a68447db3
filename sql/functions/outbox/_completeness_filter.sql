-- outbox._completeness_filter(p_scope json) RETURNS text  (private helper, SPEC R-OP-2)
-- The canonical source filter of a completeness scope: {} = every event; optional members
-- eventTypes and destinations, each a non-empty array (at most 100) of literals (D-4), sorted
-- and de-duplicated, returned as RFC 8785 text ({"destinations":[..],"eventTypes":[..]}, absent
-- members omitted). {"sourceKind":"observation"} = every accepted observation (R-OB-4; alone:
-- the event members do not apply to it). Its jcs-sha256-v1 is the manifest's sourceFilterSha256.
-- SQLSTATEs: 22023 scope not an object, unknown member, not an array of literals.
-- Locking: none. Caller: take_completeness_snapshot; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._completeness_filter(p_scope json)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_key   text;
    v_parts text[] := ARRAY[]::text[];
    v_vals  text[];
BEGIN
    IF p_scope IS NULL OR pg_catalog.json_typeof(p_scope) <> 'object' THEN
        RAISE EXCEPTION 'completeness scope must be a JSON object' USING ERRCODE = '22023',
            HINT = '{} = every event; optional members eventTypes: [..], destinations: [..]; {"sourceKind": "observation"} = every accepted observation';
    END IF;
    FOR v_key IN SELECT k FROM pg_catalog.json_object_keys(p_scope) AS k LOOP
        IF v_key NOT IN ('eventTypes', 'destinations', 'sourceKind') THEN
            RAISE EXCEPTION 'completeness scope: unknown member %', pg_catalog.left(v_key, 64) USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_scope)) <>
       (SELECT pg_catalog.count(DISTINCT k) FROM pg_catalog.json_object_keys(p_scope) AS k) THEN
        RAISE EXCEPTION 'completeness scope: duplicate member' USING ERRCODE = '22023';
    END IF;
    IF p_scope -> 'sourceKind' IS NOT NULL THEN
        IF pg_catalog.json_typeof(p_scope -> 'sourceKind') <> 'string'
           OR (p_scope ->> 'sourceKind') NOT IN ('event', 'observation') THEN
            RAISE EXCEPTION 'completeness scope: sourceKind must be "event" or "observation"' USING ERRCODE = '22023';
        END IF;
        IF (p_scope ->> 'sourceKind') = 'observation' THEN
            IF p_scope -> 'eventTypes' IS NOT NULL OR p_scope -> 'destinations' IS NOT NULL THEN
                RAISE EXCEPTION 'completeness scope: sourceKind "observation" takes no eventTypes or destinations' USING ERRCODE = '22023';
            END IF;
            RETURN '{"sourceKind":"observation"}';
        END IF;
    END IF;
    FOREACH v_key IN ARRAY ARRAY['destinations', 'eventTypes'] LOOP
        CONTINUE WHEN p_scope -> v_key IS NULL;
        IF pg_catalog.json_typeof(p_scope -> v_key) <> 'array'
           OR pg_catalog.json_array_length(p_scope -> v_key) NOT BETWEEN 1 AND 100
           OR EXISTS (SELECT 1 FROM pg_catalog.json_array_elements(p_scope -> v_key) AS x
                       WHERE pg_catalog.json_typeof(x) <> 'string'
                          OR pg_catalog.length(x #>> '{}') > 200
                          OR (x #>> '{}') !~ '^[a-z0-9][a-z0-9._@-]*$') THEN
            RAISE EXCEPTION 'completeness scope: % must be an array of 1..100 literals', v_key USING ERRCODE = '22023',
                HINT = 'literals match ^[a-z0-9][a-z0-9._@-]*$ and are compared exactly (no prefix or wildcard)';
        END IF;
        SELECT pg_catalog.array_agg(DISTINCT x COLLATE "C" ORDER BY x COLLATE "C")
          INTO v_vals FROM pg_catalog.json_array_elements_text(p_scope -> v_key) AS x;
        v_parts := v_parts || pg_catalog.format('"%s":%s', v_key, pg_catalog.to_json(v_vals)::text);
    END LOOP;
    RETURN '{' || pg_catalog.array_to_string(v_parts, ',') || '}';
END
$function$;

COMMENT ON FUNCTION outbox._completeness_filter(json) IS
    'Private: canonical source filter text of a completeness scope (SPEC R-OP-2). 22023 on a malformed scope.';

REVOKE ALL ON FUNCTION outbox._completeness_filter(json) FROM PUBLIC;
