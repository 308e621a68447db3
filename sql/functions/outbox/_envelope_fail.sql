-- outbox._envelope_fail(detail): raise OB105 (envelope invalid). Private helper; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._envelope_fail(p_detail text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'envelope invalid' USING ERRCODE = 'OB105', DETAIL = p_detail;
END
$function$;

REVOKE ALL ON FUNCTION outbox._envelope_fail(text) FROM PUBLIC;
