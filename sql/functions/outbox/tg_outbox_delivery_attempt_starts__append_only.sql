-- tg_outbox_delivery_attempt_starts__append_only: attempt starts are immutable facts: one per claim (SPEC §2, R-SEC-3).
-- UPDATE, DELETE and TRUNCATE raise OB202 (immutability violation) for every role, the owner
-- included; only INSERT is possible (and only through the kernel's functions: no role but the
-- owner has INSERT on the table).
CREATE OR REPLACE FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'outbox.outbox_delivery_attempt_starts is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_delivery_attempt_starts is not allowed', TG_OP);
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only() IS
    'Trigger: outbox.outbox_delivery_attempt_starts is append-only; UPDATE/DELETE/TRUNCATE raise OB202 (SPEC R-SEC-3).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only() FROM PUBLIC;
