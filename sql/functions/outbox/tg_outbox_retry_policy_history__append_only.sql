-- tg_outbox_retry_policy_history__append_only: the retry-policy history is an append-only audit trail (SPEC §2, D-5).
-- UPDATE, DELETE and TRUNCATE raise OB202 (immutability violation) for every role, the owner
-- included; only INSERT is possible (and only through the kernel's functions: no role but the
-- owner has INSERT on the table).
CREATE OR REPLACE FUNCTION outbox.tg_outbox_retry_policy_history__append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'outbox.outbox_retry_policy_history is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_retry_policy_history is not allowed', TG_OP);
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_retry_policy_history__append_only() IS
    'Trigger: outbox.outbox_retry_policy_history is append-only; UPDATE/DELETE/TRUNCATE raise OB202 (SPEC R-SEC-3).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_retry_policy_history__append_only() FROM PUBLIC;
