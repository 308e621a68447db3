-- outbox._jcs_number(p_literal text) RETURNS text  (private helper, SPEC D-2)
-- Canonical form of a JSON number literal under the jcs-sha256-v1 subset: the number must denote
-- an integer with |n| <= 2^53-1 (however it is written: 56.0, 1E2, -0, 0.5e1 are fine) and is
-- returned as the shortest decimal integer ("56", "100", "0", "5"), which is what RFC 8785's
-- ECMAScript number serialization yields for such values. Decided exactly on the decimal literal
-- (no float or numeric rounding, no exponent limits), the same way as internal/canon in Go.
-- Raises OB201 for a non-integer or unsafe number. Caller: outbox._jcs_value; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._jcs_number(p_literal text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION outbox._jcs_number(text) IS
    'Private: canonical text of a JSON integer literal with |n| <= 2^53-1, else OB201 (SPEC D-2).';

REVOKE ALL ON FUNCTION outbox._jcs_number(text) FROM PUBLIC;
