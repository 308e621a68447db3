-- Deferred anti-join (SPEC R-AP-5): at COMMIT, every event appended in the transaction has
-- exactly one delivery per mandatory member of its frozen delivery set, each carrying the
-- member's frozen consumer, receipt and projection target: no missing and no extra rows.
-- A violation raises OB104 and aborts the whole business transaction. The trigger functions are
-- SECURITY DEFINER: deferred triggers fire at COMMIT as the committing role (e.g. a producer),
-- which has no access to the tables being compared.
CREATE FUNCTION outbox._check_event_delivery_set(p_event_id uuid) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_missing integer;
    v_extra   integer;
BEGIN
    WITH m AS (
        SELECT mm.destination, mm.consumer_name, mm.expected_receipt_type, mm.expected_receipt_schema_version,
               mm.projection_name, mm.projection_version
        FROM outbox.outbox_events e
        JOIN outbox.delivery_set_members mm
          ON mm.delivery_set_version = e.delivery_set_version
         AND mm.definition_digest = e.delivery_set_definition_digest
         AND mm.event_type = e.event_type AND mm.event_schema_version = e.schema_version AND mm.mandatory
        WHERE e.event_id = p_event_id
    ), d AS (
        SELECT dd.destination, dd.consumer_name, dd.expected_receipt_type, dd.expected_receipt_schema_version,
               dd.required_projection_name, dd.required_projection_version
        FROM outbox.outbox_deliveries dd
        JOIN outbox.outbox_events e ON e.event_id = dd.event_id AND e.delivery_set_version = dd.delivery_set_version
        WHERE dd.event_id = p_event_id AND dd.mandatory
    )
    SELECT (SELECT count(*) FROM (SELECT * FROM m EXCEPT ALL SELECT * FROM d) x),
           (SELECT count(*) FROM (SELECT * FROM d EXCEPT ALL SELECT * FROM m) y)
           + (SELECT count(*) FROM outbox.outbox_deliveries dd
              WHERE dd.event_id = p_event_id
                AND (NOT dd.mandatory OR dd.delivery_set_version IS DISTINCT FROM
                     (SELECT e.delivery_set_version FROM outbox.outbox_events e WHERE e.event_id = p_event_id)))
    INTO v_missing, v_extra;
    IF v_missing > 0 OR v_extra > 0 OR NOT EXISTS (SELECT 1 FROM outbox.outbox_events e WHERE e.event_id = p_event_id) THEN
        RAISE EXCEPTION 'delivery set of event incomplete or with extra rows at commit'
            USING ERRCODE = 'OB104',
                  DETAIL = format('event %s: %s missing, %s extra delivery rows', p_event_id, v_missing, v_extra);
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION outbox._check_event_delivery_set(uuid) FROM PUBLIC;

CREATE FUNCTION outbox.tg_outbox_events__delivery_set_complete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM outbox._check_event_delivery_set(NEW.event_id);
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_events__delivery_set_complete() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER tg_outbox_events__delivery_set_complete
    AFTER INSERT ON outbox.outbox_events
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_events__delivery_set_complete();

-- A delivery inserted for an event of an earlier transaction (the event's own check already
-- ran) is checked against its event's set at COMMIT too. For deliveries of events appended in
-- the same transaction the event's trigger does the work.
CREATE FUNCTION outbox.tg_outbox_deliveries__delivery_set_member() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox.outbox_events e
                   WHERE e.event_id = NEW.event_id AND e.xmin::text = pg_catalog.pg_current_xact_id()::xid::text) THEN
        PERFORM outbox._check_event_delivery_set(NEW.event_id);
    END IF;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_deliveries__delivery_set_member() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER tg_outbox_deliveries__delivery_set_member
    AFTER INSERT ON outbox.outbox_deliveries
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_deliveries__delivery_set_member();
