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
