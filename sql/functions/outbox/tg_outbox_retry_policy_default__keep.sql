CREATE OR REPLACE FUNCTION outbox.tg_outbox_retry_policy_default__keep()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'outbox.outbox_retry_policy_default cannot be deleted'
        USING ERRCODE = 'OB202', DETAIL = 'change the default with outbox.set_retry_policy(''*'', ...)';
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_retry_policy_default__keep() IS
    'Trigger: the default retry policy row is never deleted or truncated (OB202); it is changed with set_retry_policy(''*'', ...). SPEC §2, D-5.';

REVOKE ALL ON FUNCTION outbox.tg_outbox_retry_policy_default__keep() FROM PUBLIC;
