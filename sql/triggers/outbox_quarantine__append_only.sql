-- tg_outbox_quarantine__append_only: quarantine is a state, never a deletion (SPEC R-AK-6,
-- R-SEC-3). Rows are append-only except acknowledged_at and case_id, which an operator sets when
-- the case is taken up. Any change of another column, DELETE or TRUNCATE raises OB202, for every
-- role (the owner included).
CREATE FUNCTION outbox.tg_outbox_quarantine__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (NEW.destination, NEW.event_id, NEW.attempt_id, NEW.reason,
            NEW.event_envelope_digest_algorithm_version, NEW.event_envelope_sha256, NEW.quarantined_at)
           IS NOT DISTINCT FROM
           (OLD.destination, OLD.event_id, OLD.attempt_id, OLD.reason,
            OLD.event_envelope_digest_algorithm_version, OLD.event_envelope_sha256, OLD.quarantined_at) THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'outbox.outbox_quarantine is append-only except acknowledged_at and case_id'
            USING ERRCODE = 'OB202',
                  DETAIL = pg_catalog.format('quarantine row %s/%s: only acknowledged_at and case_id may change',
                                             OLD.destination, OLD.event_id);
    END IF;
    RAISE EXCEPTION 'outbox.outbox_quarantine is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_quarantine is not allowed', TG_OP);
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_quarantine__append_only() IS
    'Trigger: outbox.outbox_quarantine rows are append-only except acknowledged_at/case_id; other changes, DELETE, TRUNCATE raise OB202 (SPEC R-AK-6).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_quarantine__append_only() FROM PUBLIC;

CREATE TRIGGER tg_outbox_quarantine__append_only
    BEFORE UPDATE OR DELETE ON outbox.outbox_quarantine
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();
CREATE TRIGGER tg_outbox_quarantine__append_only_truncate
    BEFORE TRUNCATE ON outbox.outbox_quarantine
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();
