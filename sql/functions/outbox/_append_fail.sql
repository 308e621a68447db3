-- outbox._append_fail(p_sqlstate text, p_message text, p_detail text, p_hint text) RETURNS integer
-- Raise p_sqlstate (OB103, OB105 or OB201) with a message, detail and hint from inside a
-- set-based query of the append rules (outbox._append_validate, outbox.append_events): called in
-- a CASE branch for the first element that breaks a rule, it never returns (the integer result
-- type only lets it stand where an expression is expected). NULL detail/hint are left out.
-- Private helper; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._append_fail(p_sqlstate text, p_message text, p_detail text, p_hint text)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION USING ERRCODE = p_sqlstate, MESSAGE = p_message,
        DETAIL = COALESCE(p_detail, ''), HINT = COALESCE(p_hint, '');
END
$function$;

COMMENT ON FUNCTION outbox._append_fail(text, text, text, text) IS
    'Private: raise an append rule''s SQLSTATE from inside a set-based query (SPEC §3.2, R-AK-9).';

REVOKE ALL ON FUNCTION outbox._append_fail(text, text, text, text) FROM PUBLIC;
