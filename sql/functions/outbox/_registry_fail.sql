-- outbox._registry_fail(detail): raise OB101 (delivery-set definition invalid) with a detail.
-- Private helper of register_delivery_set; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._registry_fail(p_detail text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'delivery-set definition invalid' USING ERRCODE = 'OB101', DETAIL = p_detail;
END
$function$;

REVOKE ALL ON FUNCTION outbox._registry_fail(text) FROM PUBLIC;
