-- outbox._jcs_value(p_value json, p_depth integer) RETURNS text  (private helper, SPEC D-2)
-- RFC 8785 (JCS) canonical text of one JSON value under the jcs-sha256-v1 subset. Recursive over
-- objects and arrays only; scalars of a container are rendered inline in one aggregate query:
--   strings  to_json(text) escaping (exactly the JCS escapes),
--   numbers  integers with |n| <= 2^53-1 in shortest decimal form (outbox._jcs_number),
--   members  sorted by the UTF-16 code units of their names (outbox._jcs_sort_key trick),
--   literals true / false / null as they are.
-- p_depth is the nesting level of p_value when it is a container (the document's top level is 1).
-- Raises OB201 for duplicate member names, non-integer or unsafe numbers, and containers nested
-- deeper than 64 levels. PostgreSQL itself raises 22P05 (\u0000) and 22P02 (lone surrogate) while
-- de-escaping; outbox.jcs_canonicalize turns those into OB201.
-- Caller: outbox.jcs_canonicalize (and itself); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._jcs_value(p_value json, p_depth integer)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_type     text := pg_catalog.json_typeof(p_value);
    v_text     text;
    v_count    bigint;
    v_distinct bigint;
    v_dup      text;
    v_longest  integer;
BEGIN
    IF v_type = 'object' OR v_type = 'array' THEN
        IF p_depth > 64 THEN
            RAISE EXCEPTION 'jcs: document nested deeper than 64 levels'
                USING ERRCODE = 'OB201', DETAIL = 'jcs-sha256-v1 documents may nest at most 64 objects/arrays';
        END IF;
    END IF;

    IF v_type = 'object' THEN
        SELECT pg_catalog.count(*),
               pg_catalog.count(DISTINCT e.key COLLATE "C"),
               pg_catalog.max(pg_catalog.length(e.key)),
               pg_catalog.string_agg(
                   pg_catalog.to_json(e.key)::text || ':' ||
                   CASE pg_catalog.json_typeof(e.value)
                       WHEN 'string' THEN pg_catalog.to_json(pg_catalog.json_extract_path_text(e.value, VARIADIC '{}'::text[]))::text
                       WHEN 'number' THEN
                           CASE WHEN e.value::text ~ '^-?[1-9][0-9]{0,14}$' OR e.value::text = '0'
                                THEN e.value::text
                                ELSE outbox._jcs_number(e.value::text) END
                       WHEN 'object' THEN outbox._jcs_value(e.value, p_depth + 1)
                       WHEN 'array' THEN outbox._jcs_value(e.value, p_depth + 1)
                       ELSE e.value::text
                   END,
                   ','
                   ORDER BY CASE WHEN e.key ~ '[\uE000-\uFFFF]'
                                 THEN outbox._jcs_sort_key(e.key)
                                 ELSE pg_catalog.convert_to(e.key, 'UTF8') END)
          INTO v_count, v_distinct, v_longest, v_text
          FROM pg_catalog.json_each(p_value) AS e;
        IF v_longest > 1024 THEN
            RAISE EXCEPTION 'jcs: member name longer than 1024 characters'
                USING ERRCODE = 'OB201', DETAIL = pg_catalog.format('a member name has %s characters; jcs-sha256-v1 documents allow at most 1024 (R-SEC-5)', v_longest);
        END IF;
        IF v_count <> v_distinct THEN
            SELECT d.k INTO v_dup
              FROM (SELECT e.key COLLATE "C" AS k FROM pg_catalog.json_each(p_value) AS e) AS d
             GROUP BY d.k
            HAVING pg_catalog.count(*) > 1
             LIMIT 1;
            RAISE EXCEPTION 'jcs: duplicate member name %', pg_catalog.to_json(v_dup)::text
                USING ERRCODE = 'OB201', DETAIL = 'RFC 8785 documents must not repeat a member name within one object';
        END IF;
        RETURN '{' || COALESCE(v_text, '') || '}';

    ELSIF v_type = 'array' THEN
        SELECT pg_catalog.string_agg(
                   CASE pg_catalog.json_typeof(e.value)
                       WHEN 'string' THEN pg_catalog.to_json(pg_catalog.json_extract_path_text(e.value, VARIADIC '{}'::text[]))::text
                       WHEN 'number' THEN
                           CASE WHEN e.value::text ~ '^-?[1-9][0-9]{0,14}$' OR e.value::text = '0'
                                THEN e.value::text
                                ELSE outbox._jcs_number(e.value::text) END
                       WHEN 'object' THEN outbox._jcs_value(e.value, p_depth + 1)
                       WHEN 'array' THEN outbox._jcs_value(e.value, p_depth + 1)
                       ELSE e.value::text
                   END,
                   ','
                   ORDER BY e.ordinality)
          INTO v_text
          FROM pg_catalog.json_array_elements(p_value) WITH ORDINALITY AS e(value, ordinality);
        RETURN '[' || COALESCE(v_text, '') || ']';

    ELSIF v_type = 'string' THEN
        RETURN pg_catalog.to_json(pg_catalog.json_extract_path_text(p_value, VARIADIC '{}'::text[]))::text;
    ELSIF v_type = 'number' THEN
        RETURN outbox._jcs_number(p_value::text);
    ELSIF v_type = 'boolean' THEN
        RETURN CASE WHEN pg_catalog.btrim(p_value::text, E' \t\n\r') = 'true' THEN 'true' ELSE 'false' END;
    ELSE
        RETURN 'null';
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox._jcs_value(json, integer) IS
    'Private: RFC 8785 canonical text of one JSON value (jcs-sha256-v1 subset, SPEC D-2); OB201 when not canonicalizable.';

REVOKE ALL ON FUNCTION outbox._jcs_value(json, integer) FROM PUBLIC;
