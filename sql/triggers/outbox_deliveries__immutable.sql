-- Delivery immutability (SPEC R-SEC-3): the frozen columns of a delivery (what the delivery
-- set decided when the event was appended) never change, terminal states never change, rows are
-- never deleted. Lease/attempt/ack columns move only through the dispatch functions.
CREATE FUNCTION outbox.tg_outbox_deliveries__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
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
        IF OLD.status IN ('acknowledged', 'quarantined') AND NEW IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'immutability violation: terminal deliveries never change'
                USING ERRCODE = 'OB202', DETAIL = format('delivery %s/%s is %s', OLD.destination, OLD.event_id, OLD.status);
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.outbox_deliveries is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'deliveries are never deleted; quarantine is a state';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_deliveries__immutable() FROM PUBLIC;

-- UPDATE: the WHEN clause (evaluated by the executor, no PL/pgSQL call) lets through every
-- update that keeps the frozen columns and does not touch a terminal row - the dispatch hot
-- path - and runs the function, which raises, only for a violation (P-4: no per-row function
-- call on claims and outcomes).
CREATE TRIGGER tg_outbox_deliveries__immutable BEFORE UPDATE ON outbox.outbox_deliveries
    FOR EACH ROW
    WHEN ((NEW.destination, NEW.event_id, NEW.delivery_set_version, NEW.consumer_name, NEW.expected_receipt_type,
           NEW.expected_receipt_schema_version, NEW.required_projection_name, NEW.required_projection_version,
           NEW.mandatory, NEW.aggregate_id, NEW.aggregate_revision, NEW.created_at)
          IS DISTINCT FROM
          (OLD.destination, OLD.event_id, OLD.delivery_set_version, OLD.consumer_name, OLD.expected_receipt_type,
           OLD.expected_receipt_schema_version, OLD.required_projection_name, OLD.required_projection_version,
           OLD.mandatory, OLD.aggregate_id, OLD.aggregate_revision, OLD.created_at)
          OR (OLD.status IN ('acknowledged', 'quarantined') AND NEW.* IS DISTINCT FROM OLD.*))
    EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();
CREATE TRIGGER tg_outbox_deliveries__no_delete BEFORE DELETE ON outbox.outbox_deliveries
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();
CREATE TRIGGER tg_outbox_deliveries__no_truncate BEFORE TRUNCATE ON outbox.outbox_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();
