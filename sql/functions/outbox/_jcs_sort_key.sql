-- outbox._jcs_sort_key(p_name text) RETURNS bytea  (private helper, SPEC D-2, R-SEC-5)
-- A byte string whose bytewise order equals the UTF-16 code-unit order of member names
-- (RFC 8785 §3.2.3): the UTF-8 bytes of the name with the lead bytes 0xEE and 0xEF (U+E000..U+FFFF)
-- rewritten to 0xF8 and 0xF9, so that those characters sort after every supplementary character
-- (lead bytes 0xF0..0xF4), as their UTF-16 code units sort after the surrogates D800..DFFF.
-- 0xEE/0xEF only ever occur as lead bytes in valid UTF-8, and 0xF8/0xF9 never occur at all.
-- Linear in the name's length (R-SEC-5): the bytes as hex, each byte followed by a comma (so a
-- match of 'ee,' is always one whole byte), two replace() calls, back to bytes - no per-byte
-- loop (set_byte copied the whole value once per rewritten byte: quadratic).
-- Only called for names that contain a character in U+E000..U+FFFF; other names sort by their
-- plain UTF-8 bytes. Raises nothing. Caller: outbox._jcs_value only; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._jcs_sort_key(p_name text)
 RETURNS bytea
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$
    SELECT pg_catalog.decode(
               pg_catalog.replace(
                   pg_catalog.replace(
                       pg_catalog.replace(
                           pg_catalog.regexp_replace(pg_catalog.encode(pg_catalog.convert_to(p_name, 'UTF8'), 'hex'),
                                                     '(..)', '\1,', 'g'),
                           'ee,', 'f8,'),
                       'ef,', 'f9,'),
                   ',', ''),
               'hex')
$function$;

COMMENT ON FUNCTION outbox._jcs_sort_key(text) IS
    'Private: UTF-16 code-unit order sort key of a JSON member name (RFC 8785 §3.2.3, SPEC D-2); linear in the name (R-SEC-5).';

REVOKE ALL ON FUNCTION outbox._jcs_sort_key(text) FROM PUBLIC;
