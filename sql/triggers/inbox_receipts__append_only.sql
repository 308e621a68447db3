-- Receipts are append-only (SPEC R-SEC-3, R-RT-2): no UPDATE, DELETE or TRUNCATE, whoever the
-- role (the owner included). A receipt is corrected by never being wrong: insert-or-compare.
CREATE FUNCTION inbox.tg_inbox_receipts__append_only() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_receipts is not allowed', TG_OP
        USING ERRCODE = 'OB202',
              DETAIL = 'receipts are append-only (SPEC R-SEC-3); receipts referenced by acks are never deleted (R-RT-2)';
END
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_receipts__append_only() FROM PUBLIC;

CREATE TRIGGER tg_inbox_receipts__append_only BEFORE UPDATE OR DELETE ON inbox.inbox_receipts
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_receipts__append_only();
CREATE TRIGGER tg_inbox_receipts__append_only_truncate BEFORE TRUNCATE ON inbox.inbox_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_receipts__append_only();
