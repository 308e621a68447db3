-- tg_outbox_recoveries__append_only: the recovery audit (SPEC R-AK-10, R-SEC-3) is append-only.
-- INSERT: recovered_txid is always set to the inserting transaction's id (pg_current_xact_id(),
--   the top-level id even inside a savepoint), whatever the statement supplied. The deliveries'
--   immutability trigger lets a delivery leave quarantined only when an audit row for it carries
--   the current transaction's id, so an audit row cannot be prepared in advance or reused later.
-- UPDATE, DELETE and TRUNCATE raise OB202 for every role, the owner included.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_recoveries__append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.recovered_txid := pg_catalog.pg_current_xact_id();
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'outbox.outbox_recoveries is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_recoveries is not allowed: a recovery audit row never changes', TG_OP);
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_recoveries__append_only() IS
    'Trigger: outbox.outbox_recoveries is append-only (UPDATE/DELETE/TRUNCATE raise OB202); INSERT stamps recovered_txid with the current transaction id (SPEC R-AK-10, R-SEC-3).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_recoveries__append_only() FROM PUBLIC;
