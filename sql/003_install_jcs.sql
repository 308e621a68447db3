-- Canonical JSON (RFC 8785) and jcs-sha256-v1 digests (SPEC D-2). PL/pgSQL twin of internal/canon;
-- both are held byte-identical by the golden vectors in tests/jcs_test.go (T-6).
SET LOCAL ROLE outbox_owner;

-- Private helpers: owned by outbox_owner, EXECUTE revoked from PUBLIC, granted to nobody.
-- outbox._sha256_hex(p_text text) RETURNS text  (private helper, SPEC D-2)
-- Lower-case hex SHA-256 of the UTF-8 bytes of p_text. Used by SECURITY DEFINER functions of the
-- kernel (registry, append) that already hold canonical text. Raises nothing of its own.
-- Caller: kernel functions running as outbox_owner only; granted to nobody.
-- No SET search_path on purpose: a LANGUAGE sql function with SET is never inlined (measured
-- ~35 µs per call on the append hot path); every name is schema-qualified.
CREATE FUNCTION outbox._sha256_hex(p_text text)
RETURNS text
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_text, 'UTF8')), 'hex')
$fn$;

COMMENT ON FUNCTION outbox._sha256_hex(text) IS
    'Private: lower-case hex SHA-256 of the UTF-8 bytes of a text (SPEC D-2).';
REVOKE ALL ON FUNCTION outbox._sha256_hex(text) FROM PUBLIC;

-- outbox._jcs_sort_key(p_name text) RETURNS bytea  (private helper, SPEC D-2)
-- A byte string whose bytewise order equals the UTF-16 code-unit order of member names
-- (RFC 8785 §3.2.3): the UTF-8 bytes of the name with the lead bytes 0xEE and 0xEF (U+E000..U+FFFF)
-- rewritten to 0xF8 and 0xF9, so that those characters sort after every supplementary character
-- (lead bytes 0xF0..0xF4), as their UTF-16 code units sort after the surrogates D800..DFFF.
-- 0xEE/0xEF only ever occur as lead bytes in valid UTF-8, and 0xF8/0xF9 never occur at all.
-- Only called for names that contain a character in U+E000..U+FFFF; other names sort by their
-- plain UTF-8 bytes. Raises nothing. Caller: outbox._jcs_value only; granted to nobody.
CREATE FUNCTION outbox._jcs_sort_key(p_name text)
RETURNS bytea
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_bytes bytea := pg_catalog.convert_to(p_name, 'UTF8');
    v_byte  integer;
BEGIN
    FOR v_i IN 0 .. pg_catalog.length(v_bytes) - 1 LOOP
        v_byte := pg_catalog.get_byte(v_bytes, v_i);
        IF v_byte = 238 OR v_byte = 239 THEN          -- 0xEE, 0xEF
            v_bytes := pg_catalog.set_byte(v_bytes, v_i, v_byte + 10);  -- 0xF8, 0xF9
        END IF;
    END LOOP;
    RETURN v_bytes;
END
$fn$;

COMMENT ON FUNCTION outbox._jcs_sort_key(text) IS
    'Private: UTF-16 code-unit order sort key of a JSON member name (RFC 8785 §3.2.3, SPEC D-2).';
REVOKE ALL ON FUNCTION outbox._jcs_sort_key(text) FROM PUBLIC;

-- outbox._jcs_number(p_literal text) RETURNS text  (private helper, SPEC D-2)
-- Canonical form of a JSON number literal under the jcs-sha256-v1 subset: the number must denote
-- an integer with |n| <= 2^53-1 (however it is written: 56.0, 1E2, -0, 0.5e1 are fine) and is
-- returned as the shortest decimal integer ("56", "100", "0", "5"), which is what RFC 8785's
-- ECMAScript number serialization yields for such values. Decided exactly on the decimal literal
-- (no float or numeric rounding, no exponent limits), the same way as internal/canon in Go.
-- Raises OB201 for a non-integer or unsafe number. Caller: outbox._jcs_value; granted to nobody.
CREATE FUNCTION outbox._jcs_number(p_literal text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_parts   text[];
    v_digits  text;
    v_trimmed text;
    v_expdig  text;
    v_exp     bigint;
    v_e10     bigint;
    v_value   bigint;
BEGIN
    v_parts := pg_catalog.regexp_match(p_literal,
        '^[ \t\n\r]*(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?[ \t\n\r]*$');
    IF v_parts IS NULL THEN
        RAISE EXCEPTION 'jcs: invalid JSON number %', pg_catalog.left(p_literal, 64)
            USING ERRCODE = 'OB201', DETAIL = 'the literal is not a JSON number';
    END IF;
    -- significant digits: integer and fraction digits without leading zeros
    v_digits := pg_catalog.ltrim(v_parts[2] || COALESCE(v_parts[3], ''), '0');
    IF v_digits = '' THEN
        RETURN '0';  -- any zero, including -0 and 0.0e99
    END IF;
    v_trimmed := pg_catalog.rtrim(v_digits, '0');
    v_expdig := pg_catalog.ltrim(COALESCE(v_parts[5], ''), '0');
    IF pg_catalog.length(v_expdig) > 9 THEN
        v_exp := 1000000000;  -- beyond any document length: decides the same way as the true value
    ELSE
        v_exp := COALESCE(NULLIF(v_expdig, ''), '0')::bigint;
    END IF;
    IF v_parts[4] = '-' THEN
        v_exp := -v_exp;
    END IF;
    -- value = v_trimmed * 10^v_e10
    v_e10 := v_exp - pg_catalog.length(COALESCE(v_parts[3], ''))
             + (pg_catalog.length(v_digits) - pg_catalog.length(v_trimmed));
    IF v_e10 < 0 THEN
        RAISE EXCEPTION 'jcs: number % is not an integer', pg_catalog.left(p_literal, 64)
            USING ERRCODE = 'OB201',
                  DETAIL = 'jcs-sha256-v1 documents may only hold integers with |n| <= 2^53-1',
                  HINT = 'Encode decimal amounts and quantities as strings.';
    END IF;
    IF pg_catalog.length(v_trimmed) + v_e10 > 16 THEN
        v_value := NULL;
    ELSE
        v_value := (v_trimmed || pg_catalog.repeat('0', v_e10::integer))::bigint;
    END IF;
    IF v_value IS NULL OR v_value > 9007199254740991 THEN
        RAISE EXCEPTION 'jcs: number % is outside the safe integer range', pg_catalog.left(p_literal, 64)
            USING ERRCODE = 'OB201',
                  DETAIL = 'jcs-sha256-v1 documents may only hold integers with |n| <= 2^53-1',
                  HINT = 'Encode large integers as strings.';
    END IF;
    IF v_parts[1] = '-' THEN
        v_value := -v_value;
    END IF;
    RETURN v_value::text;
END
$fn$;

COMMENT ON FUNCTION outbox._jcs_number(text) IS
    'Private: canonical text of a JSON integer literal with |n| <= 2^53-1, else OB201 (SPEC D-2).';
REVOKE ALL ON FUNCTION outbox._jcs_number(text) FROM PUBLIC;

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
CREATE FUNCTION outbox._jcs_value(p_value json, p_depth integer)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_type     text := pg_catalog.json_typeof(p_value);
    v_text     text;
    v_count    bigint;
    v_distinct bigint;
    v_dup      text;
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
          INTO v_count, v_distinct, v_text
          FROM pg_catalog.json_each(p_value) AS e;
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
$fn$;

COMMENT ON FUNCTION outbox._jcs_value(json, integer) IS
    'Private: RFC 8785 canonical text of one JSON value (jcs-sha256-v1 subset, SPEC D-2); OB201 when not canonicalizable.';
REVOKE ALL ON FUNCTION outbox._jcs_value(json, integer) FROM PUBLIC;


-- Public API: SECURITY DEFINER only to reach the private helpers; granted to every kernel role.
-- outbox.jcs_canonicalize(p_doc json) RETURNS text  (public, SPEC D-2)
-- Purpose: the RFC 8785 (JCS) canonical text of a JSON document, restricted to the
--   jcs-sha256-v1 subset: numbers are integers with |n| <= 2^53-1 (56.0, 1E2, -0 are accepted and
--   written 56, 100, 0), member names are unique, no string holds U+0000, at most 64 nested
--   objects/arrays. The parameter is json, not jsonb, so that duplicate names can be detected.
--   Byte-identical to internal/canon (Go) by the golden vectors of T-6. NULL in, NULL out.
-- Locking: none; IMMUTABLE, PARALLEL UNSAFE (the EXCEPTION block of jcs_canonicalize starts a
--   subtransaction, which no process may do during a parallel query; TestJCSInParallelQuery).
-- SQLSTATEs: OB201 document not canonicalizable (duplicate name, non-integer or unsafe number,
--   \u0000, lone surrogate escape, nesting deeper than 64). Text that is not JSON at all fails
--   with 22P02 in the json cast before this function runs.
-- Security: SECURITY DEFINER (owned by outbox_owner) only so that the caller can run the private,
--   ungranted helpers outbox._jcs_*; it touches no table.
-- Callers: every kernel role (outbox_owner, registrar, producer, dispatcher, consumer, auditor).
CREATE FUNCTION outbox.jcs_canonicalize(p_doc json)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN outbox._jcs_value(p_doc, 1);
EXCEPTION
    WHEN untranslatable_character OR invalid_text_representation OR character_not_in_repertoire THEN
        -- raised by PostgreSQL while de-escaping strings: \u0000 (22P05), lone surrogates (22P02)
        RAISE EXCEPTION 'jcs: document not canonicalizable: %', SQLERRM
            USING ERRCODE = 'OB201', DETAIL = 'strings must not hold \u0000 or unpaired surrogate escapes';
END
$fn$;

COMMENT ON FUNCTION outbox.jcs_canonicalize(json) IS
    'RFC 8785 (JCS) canonical text of a JSON document, jcs-sha256-v1 subset (integers |n| <= 2^53-1, unique names, no \u0000, depth <= 64); OB201 otherwise. SPEC D-2.';
REVOKE ALL ON FUNCTION outbox.jcs_canonicalize(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.jcs_canonicalize(json)
    TO outbox_owner, outbox_registrar, outbox_producer, outbox_dispatcher, outbox_consumer, outbox_auditor;

-- outbox.jcs_sha256(p_doc json) RETURNS text  (public, SPEC D-2)
-- Purpose: the jcs-sha256-v1 digest of a JSON document: 64 lower-case hex digits of the SHA-256
--   of the UTF-8 bytes of outbox.jcs_canonicalize(p_doc). Equal to canon.SHA256Hex in Go.
--   NULL in, NULL out.
-- Locking: none; IMMUTABLE, PARALLEL UNSAFE (the EXCEPTION block of jcs_canonicalize starts a
--   subtransaction, which no process may do during a parallel query; TestJCSInParallelQuery).
-- SQLSTATEs: OB201 document not canonicalizable (see outbox.jcs_canonicalize); 22P02 from the
--   json cast when the text is not JSON.
-- Security: SECURITY DEFINER (owned by outbox_owner) only to reach the ungranted private helpers;
--   it touches no table.
-- Callers: every kernel role (outbox_owner, registrar, producer, dispatcher, consumer, auditor).
CREATE FUNCTION outbox.jcs_sha256(p_doc json)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN outbox._sha256_hex(outbox.jcs_canonicalize(p_doc));
END
$fn$;

COMMENT ON FUNCTION outbox.jcs_sha256(json) IS
    'jcs-sha256-v1 digest: lower-case hex SHA-256 of the UTF-8 bytes of outbox.jcs_canonicalize(doc); OB201 when not canonicalizable. SPEC D-2.';
REVOKE ALL ON FUNCTION outbox.jcs_sha256(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.jcs_sha256(json)
    TO outbox_owner, outbox_registrar, outbox_producer, outbox_dispatcher, outbox_consumer, outbox_auditor;


-- Callers need USAGE on the schema to reach the functions (idempotent; other areas may repeat it).
GRANT USAGE ON SCHEMA outbox
    TO outbox_registrar, outbox_producer, outbox_dispatcher, outbox_consumer, outbox_auditor;

RESET ROLE;
