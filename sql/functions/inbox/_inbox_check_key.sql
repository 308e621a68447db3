-- inbox._inbox_check_key(p_consumer_name text, p_projection_name text, p_projection_version integer)
--   RETURNS void  (private helper, SPEC R-CO-1, R-CO-3)
-- Checks the (consumer, projection) part of every inbox key: the consumer name is a literal
-- (D-4); either both projection fields are empty ('' and 0: a consumer without projection) or
-- the name is a literal and the version > 0. Callers coalesce NULL to ''/0 first.
-- SQLSTATEs: 22023 invalid_parameter_value. Locking: none.
-- Caller: inbox functions running as outbox_owner only; granted to nobody.
CREATE OR REPLACE FUNCTION inbox._inbox_check_key(p_consumer_name text, p_projection_name text, p_projection_version integer)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._@-]*$' THEN
        RAISE EXCEPTION 'inbox: invalid consumer name'
            USING ERRCODE = '22023', DETAIL = 'consumer_name must match ^[a-z0-9][a-z0-9._@-]*$ (SPEC D-4)';
    END IF;
    IF p_projection_name IS NULL OR p_projection_version IS NULL THEN
        RAISE EXCEPTION 'inbox: projection fields must not be NULL here'
            USING ERRCODE = '22023', DETAIL = 'use projection_name = '''' and projection_version = 0 for a consumer without projection';
    END IF;
    IF p_projection_name = '' THEN
        IF p_projection_version <> 0 THEN
            RAISE EXCEPTION 'inbox: projection version without projection name'
                USING ERRCODE = '22023', DETAIL = 'a consumer without projection uses projection_name = '''' and projection_version = 0';
        END IF;
    ELSIF p_projection_name !~ '^[a-z0-9][a-z0-9._@-]*$' OR p_projection_version <= 0 THEN
        RAISE EXCEPTION 'inbox: invalid projection'
            USING ERRCODE = '22023', DETAIL = 'projection_name must be a literal (SPEC D-4) and projection_version > 0';
    END IF;
END
$function$;

COMMENT ON FUNCTION inbox._inbox_check_key(text, text, integer) IS
    'Private: validates the consumer/projection part of an inbox key (''''/0 = no projection); 22023 otherwise.';

REVOKE ALL ON FUNCTION inbox._inbox_check_key(text, text, integer) FROM PUBLIC;
