-- outbox._jcs_text_problem(p_text text) RETURNS text  (private, SPEC D-2 "the hot path accepts
--   exactly what the slow path accepts")
-- Purpose: decide whether a caller-supplied canonical text is exactly the RFC 8785 (JCS) form of
--   a document the slow path (outbox.jcs_canonicalize) accepts. Returns NULL when it is, else a
--   short problem description (never document content). Never raises. Cheap whole-text checks
--   (one regular expression, jsonpath over a rewritten copy); the full canonicalizer decides
--   only what they cannot.
-- Attributes: IMMUTABLE, PARALLEL UNSAFE (its EXCEPTION block starts a subtransaction).
-- Design notes (the four steps and why they are sound): docs/contract.md#outbox_jcs_text_problem
-- Caller: the hot paths of append_event/append_events (outbox._append_validate), and of the
--   receipt checks; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._jcs_text_problem(p_text text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    -- The two expressions of step 2, each one literal (no per-call concatenation). Their parts:
    --   escape  \\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f]))  the JCS escapes: \" \\ \b \f \n \r \t, and
    --           \u00xx (lower case) for the other control characters
    --   number  (?:0|-?[1-9][0-9]{0,15})(?![0-9])  canonical integers, at most 16 digits (16-digit
    --           ones are compared with 2^53-1 in step 3), never followed by another digit
    --   c_tokens      structure [{}[\],:], strings "(?:[^"\\]|escape)*", number, true, false, null
    --   c_comparable  the same, but a colon only as the end of a member name
    --                 "(?:(?:[^"\\{}:\uE000-\uFFFF]|escape)(?:[^"\\{}\uE000-\uFFFF]|escape)*)?": and other
    --                 strings "(?:(?:[^"\\:]|escape)(?:[^"\\]|escape)*)?" (no brace or U+E000..U+FFFF in a
    --                 name, no string starting with a colon)
    c_tokens constant text := '^(?:[{}[\],:]|"(?:[^"\\]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))*"|(?:0|-?[1-9][0-9]{0,15})(?![0-9])|true|false|null)*$';
    c_comparable constant text := '^(?:[{}[\],]|"(?:(?:[^"\\{}:\uE000-\uFFFF]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))(?:[^"\\{}\uE000-\uFFFF]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))*)?":|"(?:(?:[^"\\:]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))(?:[^"\\]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))*)?"|(?:0|-?[1-9][0-9]{0,15})(?![0-9])|true|false|null)*$';
    v_json json;
    v_text text := p_text;
    v_copy jsonb;
    v_size integer;
BEGIN
    IF p_text IS NULL THEN
        RETURN 'canonical text is NULL';
    END IF;
    v_json := p_text::json;

    -- R-SEC-5: member names are bounded (1024 characters, outbox._jcs_value). Cheap gates first:
    -- a longer name needs a text of more than 1026 bytes, and (unless the text holds an escaped
    -- quote) a piece between two quotes of more than 1024 characters (string_to_array: no
    -- regular expression; a counted repetition over the whole text cost ~160 us). Only then is
    -- every member name measured - a match may also be structure before a string that starts
    -- with a colon - and a long one sends the text to the full canonicalizer, which decides.
    IF pg_catalog.octet_length(p_text) > 1026
       AND (pg_catalog.strpos(p_text, '\"') > 0
            OR (SELECT pg_catalog.max(pg_catalog.length(e.piece))
                  FROM pg_catalog.unnest(pg_catalog.string_to_array(p_text, '"')) AS e(piece)) > 1024)
       AND EXISTS (SELECT 1
                     FROM pg_catalog.regexp_matches(p_text, '"((?:[^"\\]|\\.)*)":', 'g') AS m(g)
                    WHERE pg_catalog.length(pg_catalog.regexp_replace(m.g[1], '\\(u....|.)', 'x', 'g')) > 1024) THEN
        IF outbox.jcs_canonicalize(v_json) IS DISTINCT FROM p_text THEN
            RETURN 'not the RFC 8785 canonical form of its document';
        END IF;
        RETURN NULL;
    END IF;

    IF p_text !~ c_comparable THEN
        IF p_text !~ c_tokens THEN
            RETURN 'not RFC 8785 canonical: insignificant whitespace, a non-canonical number or string escape, or a number that is not an integer with |n| <= 2^53-1';
        END IF;
        -- canonical tokens, but a member name the order check cannot compare: fallback below
    ELSE
        IF pg_catalog.strpos(v_text, '\') > 0 THEN
            v_text := pg_catalog.replace(pg_catalog.replace(v_text, '\\', '\u005c'), '\"', '\u0022');
        END IF;
        IF pg_catalog.strpos(v_text, '{}') > 0 THEN
            v_text := pg_catalog.replace(v_text, '{}', '[1.5]');
        END IF;
        v_copy := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                      v_text, '{', '[1.5,'), '}', ']'), '":', '",')::jsonb;

        IF p_text ~ '[0-9]{16}'
           AND pg_catalog.jsonb_path_exists(v_copy,
                   'strict $.** ? (@.type() == "number" && (@ > 9007199254740991 || @ < -9007199254740991))') THEN
            RETURN 'a number outside the safe integer range |n| <= 2^53-1';
        END IF;
        IF pg_catalog.jsonb_path_exists(v_copy, 'strict $.**{64} ? (@.type() == "array")') THEN
            RETURN 'nested deeper than 64 levels';
        END IF;

        -- The first former object whose names are not strictly increasing (names 1..64), or that
        -- has more than 64 members; its size tells which.
        v_size := pg_catalog.jsonb_path_query_first(v_copy,
            'strict $.** ? (@[0] == 1.5 && (
            @[1] >= @[3] || @.size() > 6 && (@[3] >= @[5] || @.size() > 8 && (@[5] >= @[7] ||
            @.size() > 10 && (@[7] >= @[9] || @.size() > 12 && (@[9] >= @[11] ||
            @.size() > 14 && (@[11] >= @[13] || @.size() > 16 && (@[13] >= @[15] ||
            @.size() > 18 && (@[15] >= @[17] || @.size() > 20 && (@[17] >= @[19] ||
            @.size() > 22 && (@[19] >= @[21] || @.size() > 24 && (@[21] >= @[23] ||
            @.size() > 26 && (@[23] >= @[25] || @.size() > 28 && (@[25] >= @[27] ||
            @.size() > 30 && (@[27] >= @[29] || @.size() > 32 && (@[29] >= @[31] ||
            @.size() > 34 && (@[31] >= @[33] || @.size() > 36 && (@[33] >= @[35] ||
            @.size() > 38 && (@[35] >= @[37] || @.size() > 40 && (@[37] >= @[39] ||
            @.size() > 42 && (@[39] >= @[41] || @.size() > 44 && (@[41] >= @[43] ||
            @.size() > 46 && (@[43] >= @[45] || @.size() > 48 && (@[45] >= @[47] ||
            @.size() > 50 && (@[47] >= @[49] || @.size() > 52 && (@[49] >= @[51] ||
            @.size() > 54 && (@[51] >= @[53] || @.size() > 56 && (@[53] >= @[55] ||
            @.size() > 58 && (@[55] >= @[57] || @.size() > 60 && (@[57] >= @[59] ||
            @.size() > 62 && (@[59] >= @[61] || @.size() > 64 && (@[61] >= @[63] ||
            @.size() > 66 && (@[63] >= @[65] || @.size() > 68 && (@[65] >= @[67] ||
            @.size() > 70 && (@[67] >= @[69] || @.size() > 72 && (@[69] >= @[71] ||
            @.size() > 74 && (@[71] >= @[73] || @.size() > 76 && (@[73] >= @[75] ||
            @.size() > 78 && (@[75] >= @[77] || @.size() > 80 && (@[77] >= @[79] ||
            @.size() > 82 && (@[79] >= @[81] || @.size() > 84 && (@[81] >= @[83] ||
            @.size() > 86 && (@[83] >= @[85] || @.size() > 88 && (@[85] >= @[87] ||
            @.size() > 90 && (@[87] >= @[89] || @.size() > 92 && (@[89] >= @[91] ||
            @.size() > 94 && (@[91] >= @[93] || @.size() > 96 && (@[93] >= @[95] ||
            @.size() > 98 && (@[95] >= @[97] || @.size() > 100 && (@[97] >= @[99] ||
            @.size() > 102 && (@[99] >= @[101] || @.size() > 104 && (@[101] >= @[103] ||
            @.size() > 106 && (@[103] >= @[105] || @.size() > 108 && (@[105] >= @[107] ||
            @.size() > 110 && (@[107] >= @[109] || @.size() > 112 && (@[109] >= @[111] ||
            @.size() > 114 && (@[111] >= @[113] || @.size() > 116 && (@[113] >= @[115] ||
            @.size() > 118 && (@[115] >= @[117] || @.size() > 120 && (@[117] >= @[119] ||
            @.size() > 122 && (@[119] >= @[121] || @.size() > 124 && (@[121] >= @[123] ||
            @.size() > 126 && (@[123] >= @[125] || @.size() > 128 && (@[125] >= @[127] ||
            @.size() > 129)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))).size()')::integer;
        IF v_size IS NULL THEN
            RETURN NULL;
        ELSIF v_size <= 129 THEN
            RETURN 'member names not in RFC 8785 order, or a duplicate member name';
        END IF;
        -- an object with more than 64 members: fallback below
    END IF;

    -- Fallback: the full canonicalizer decides.
    IF outbox.jcs_canonicalize(v_json) IS DISTINCT FROM p_text THEN
        RETURN 'not the RFC 8785 canonical form of its document';
    END IF;
    RETURN NULL;
EXCEPTION
    WHEN SQLSTATE 'OB201' THEN
        RETURN 'not canonicalizable under jcs-sha256-v1 (duplicate member name, a number that is not an integer with |n| <= 2^53-1, \u0000 or an unpaired surrogate, nesting deeper than 64, a member name longer than 1024 characters, or a document larger than max_payload_bytes)';
    WHEN invalid_text_representation OR statement_too_complex OR program_limit_exceeded THEN
        RETURN 'not JSON';
END
$function$;

COMMENT ON FUNCTION outbox._jcs_text_problem(text) IS
    'Private: NULL when the text is exactly the RFC 8785 canonical form of a document the slow path accepts, else a problem (SPEC D-2). Cheap whole-text checks (regex, jsonpath); the full canonicalizer only when they cannot decide.';

REVOKE ALL ON FUNCTION outbox._jcs_text_problem(text) FROM PUBLIC;
