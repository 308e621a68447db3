-- Delivery immutability (SPEC R-SEC-3): the frozen columns of a delivery (what the delivery
-- set decided when the event was appended) never change, terminal states never change, rows are
-- never deleted. Lease/attempt/ack columns move only through the dispatch functions.
-- The one exception (SPEC R-AK-10): a quarantined delivery goes back to pending through
-- outbox.redeliver_quarantined, and only like this - status 'pending', a new available_at,
-- recovery_attempt_base := attempt_count, every other column unchanged - and only when the
-- same transaction wrote the recovery audit row for it (outbox.outbox_recoveries, stamped with
-- pg_current_xact_id() by its insert trigger, matching the attempt count and the new
-- available_at). No setting can stand in for that row, so a direct UPDATE (the owner's too)
-- raises OB202. The branch refers to outbox_recoveries and recovery_attempt_base, which the
-- recovery migration creates; before it, the branch fails (undefined object), i.e. closed.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_deliveries__immutable()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_expect outbox.outbox_deliveries;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (NEW.destination, NEW.event_id, NEW.delivery_set_version, NEW.consumer_name, NEW.expected_receipt_type,
            NEW.expected_receipt_schema_version, NEW.required_projection_name, NEW.required_projection_version,
            NEW.mandatory, NEW.aggregate_id, NEW.aggregate_revision, NEW.created_at)
           IS DISTINCT FROM
           (OLD.destination, OLD.event_id, OLD.delivery_set_version, OLD.consumer_name, OLD.expected_receipt_type,
            OLD.expected_receipt_schema_version, OLD.required_projection_name, OLD.required_projection_version,
            OLD.mandatory, OLD.aggregate_id, OLD.aggregate_revision, OLD.created_at) THEN
            RAISE EXCEPTION 'immutability violation: frozen delivery columns never change'
                USING ERRCODE = 'OB202', DETAIL = format('delivery %s/%s', OLD.destination, OLD.event_id);
        END IF;
        IF OLD.status = 'quarantined' AND NEW.status = 'pending' THEN
            v_expect := OLD;
            v_expect.status := 'pending';
            v_expect.available_at := NEW.available_at;
            v_expect.recovery_attempt_base := OLD.attempt_count;
            IF NEW IS NOT DISTINCT FROM v_expect
               AND EXISTS (SELECT 1 FROM outbox.outbox_recoveries AS r
                            WHERE r.destination = OLD.destination AND r.event_id = OLD.event_id
                              AND r.recovered_txid = pg_catalog.pg_current_xact_id()
                              AND r.before_attempt_count = OLD.attempt_count
                              AND r.after_available_at = NEW.available_at) THEN
                RETURN NEW;
            END IF;
            RAISE EXCEPTION 'immutability violation: a quarantined delivery leaves quarantine only through outbox.redeliver_quarantined'
                USING ERRCODE = 'OB202',
                      DETAIL = pg_catalog.format('delivery %s/%s: no recovery audit row of this transaction for this change',
                                                 OLD.destination, OLD.event_id),
                      HINT = 'call outbox.redeliver_quarantined(destination, event_id, case_id, reason, idempotency_key) as outbox_operator';
        END IF;
        IF OLD.status IN ('acknowledged', 'quarantined') AND NEW IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'immutability violation: terminal deliveries never change'
                USING ERRCODE = 'OB202', DETAIL = format('delivery %s/%s is %s', OLD.destination, OLD.event_id, OLD.status);
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.outbox_deliveries is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'deliveries are never deleted; quarantine is a state';
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_outbox_deliveries__immutable() FROM PUBLIC;
