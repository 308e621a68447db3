CREATE OR REPLACE FUNCTION outbox.error_code_catalog()
 RETURNS TABLE(code text, retryable boolean, description text)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT e.code, e.retryable, e.description
      FROM outbox.error_codes AS e
     ORDER BY e.code COLLATE "C"
$function$;

COMMENT ON FUNCTION outbox.error_code_catalog() IS
    'The normalized error codes (outbox.error_codes) with their class and description: what the dispatcher normalizes consumer answers against (SPEC R-AK-7). Callers: outbox_dispatcher, outbox_consumer, outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.error_code_catalog() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.error_code_catalog() TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.error_code_catalog() TO outbox_consumer;
GRANT EXECUTE ON FUNCTION outbox.error_code_catalog() TO outbox_dispatcher;
