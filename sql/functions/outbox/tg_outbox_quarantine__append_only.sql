-- tg_outbox_quarantine__append_only: quarantine is a state, never a deletion (SPEC R-AK-6,
-- R-AK-10, R-SEC-3). One row per quarantine (a delivery quarantined again after a recovery gets
-- a new row; the earlier one stays). Rows are append-only except acknowledged_at and case_id,
-- which are set once (NULL -> a value, never changed afterwards): by an operator taking the case
-- up, or by outbox.redeliver_quarantined. Any other change (every other column, whatever columns
-- the table has), a second change of acknowledged_at/case_id, DELETE or TRUNCATE raises OB202,
-- for every role (the owner included).
CREATE OR REPLACE FUNCTION outbox.tg_outbox_quarantine__append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_rest outbox.outbox_quarantine;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        v_rest := NEW;
        v_rest.acknowledged_at := OLD.acknowledged_at;
        v_rest.case_id := OLD.case_id;
        IF v_rest IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'outbox.outbox_quarantine is append-only except acknowledged_at and case_id'
                USING ERRCODE = 'OB202',
                      DETAIL = pg_catalog.format('quarantine row %s/%s: only acknowledged_at and case_id may change',
                                                 OLD.destination, OLD.event_id);
        END IF;
        IF (OLD.acknowledged_at IS NOT NULL AND NEW.acknowledged_at IS DISTINCT FROM OLD.acknowledged_at)
           OR (OLD.case_id IS NOT NULL AND NEW.case_id IS DISTINCT FROM OLD.case_id) THEN
            RAISE EXCEPTION 'outbox.outbox_quarantine: acknowledged_at and case_id are set once'
                USING ERRCODE = 'OB202',
                      DETAIL = pg_catalog.format('quarantine row %s/%s already has acknowledged_at %s, case_id %s',
                                                 OLD.destination, OLD.event_id, OLD.acknowledged_at, OLD.case_id);
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'outbox.outbox_quarantine is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_quarantine is not allowed', TG_OP);
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_quarantine__append_only() IS
    'Trigger: outbox.outbox_quarantine rows are append-only except acknowledged_at/case_id, each set once; other changes, DELETE, TRUNCATE raise OB202 (SPEC R-AK-6, R-AK-10).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_quarantine__append_only() FROM PUBLIC;
