-- outbox.active_delivery_set() RETURNS TABLE (...)  (public, SPEC R-DS-5, R-DP-6)
-- Purpose: the quartet of the one active delivery-set version, or no row when none is active.
--   The dispatcher refuses to start, and /readyz answers 503, while it returns no row.
-- Locking: none (plain read); no fencing.
-- SQLSTATEs: none of its own.
-- Callers: outbox_dispatcher, outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.active_delivery_set()
 RETURNS TABLE(delivery_set_version integer, definition_schema_version integer, digest_algorithm_version text, definition_digest text, activated_at timestamp with time zone, source_release text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY
    SELECT v.delivery_set_version, v.definition_schema_version, v.digest_algorithm_version,
           v.definition_digest, v.activated_at, v.source_release
    FROM outbox.delivery_set_versions v
    WHERE v.status = 'active';
END
$function$;

COMMENT ON FUNCTION outbox.active_delivery_set() IS
    'The active delivery-set quartet (no row when none is active). SPEC R-DS-5, R-DP-6. Callers: outbox_dispatcher, outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.active_delivery_set() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.active_delivery_set() TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.active_delivery_set() TO outbox_dispatcher;
