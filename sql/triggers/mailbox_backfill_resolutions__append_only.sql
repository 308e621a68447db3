-- tg_mailbox_backfill_resolutions__append_only: an operator's resolution of an abandoned
-- backfill is an immutable audit row (SPEC R-MX-8). UPDATE, DELETE, TRUNCATE raise OB202.
CREATE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on mailbox.backfill_resolutions is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'resolutions are append-only audit rows (SPEC R-MX-8)';
END
$fn$;
REVOKE ALL ON FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only() FROM PUBLIC;

CREATE TRIGGER tg_mailbox_backfill_resolutions__append_only BEFORE UPDATE OR DELETE ON mailbox.backfill_resolutions
    FOR EACH ROW EXECUTE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only();
CREATE TRIGGER tg_mailbox_backfill_resolutions__append_only_truncate BEFORE TRUNCATE ON mailbox.backfill_resolutions
    FOR EACH STATEMENT EXECUTE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only();
