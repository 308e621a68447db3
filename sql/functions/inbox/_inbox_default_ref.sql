-- inbox._inbox_default_ref(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_id uuid) RETURNS text  (private helper, SPEC R-CO-1)
-- The repository-owned receipt ref assigned when a consumer gives none. Deterministic, so every
-- redelivery of an event names the same receipt:
--   '<consumer_name>:<event_id>'                                       (no projection)
--   '<consumer_name>:<projection_name>@<projection_version>:<event_id>' (projection consumer)
-- The Go kit (receipt.DefaultRef) uses the same formula. Raises nothing. Locking: none.
-- Caller: inbox.record_receipt (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION inbox._inbox_default_ref(p_consumer_name text, p_projection_name text, p_projection_version integer, p_event_id uuid)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT CASE WHEN p_projection_name = ''
                THEN p_consumer_name || ':' || p_event_id::text
                ELSE p_consumer_name || ':' || p_projection_name || '@' || p_projection_version::text || ':' || p_event_id::text
           END
$function$;

COMMENT ON FUNCTION inbox._inbox_default_ref(text, text, integer, uuid) IS
    'Private: deterministic default receipt ref <consumer>[:<projection>@<version>]:<event_id> (SPEC R-CO-1).';

REVOKE ALL ON FUNCTION inbox._inbox_default_ref(text, text, integer, uuid) FROM PUBLIC;
