-- tg_mailbox_backfill_resolutions__append_only: an operator's resolution of an abandoned
-- backfill is an immutable audit row (SPEC R-MX-8). UPDATE, DELETE, TRUNCATE raise OB202.
CREATE OR REPLACE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on mailbox.backfill_resolutions is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'resolutions are append-only audit rows (SPEC R-MX-8)';
END
$function$;

REVOKE ALL ON FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only() FROM PUBLIC;
