-- outbox._envelope_fail(detail): raise OB105 (envelope invalid). Private helper; granted to nobody.
CREATE FUNCTION outbox._envelope_fail(p_detail text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'envelope invalid' USING ERRCODE = 'OB105', DETAIL = p_detail;
END
$fn$;
REVOKE ALL ON FUNCTION outbox._envelope_fail(text) FROM PUBLIC;
