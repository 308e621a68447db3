-- Publications (SPEC §2 publication table, R-AK-4, T-5): one row per published event, inserted
-- once by the publication function (outbox._publish_events) and never changed. Nobody, the
-- owner included, may insert a publication outside that function or for an event with a
-- mandatory delivery that is not acknowledged, nor update, delete or truncate one: OB202.
-- INSERT: a statement-level check over the new rows (one query per publishing statement):
--   the transaction-local setting pgoutbox.publishing must be 'on' (set by the function around
--   its INSERT) AND every new row's event must have all mandatory deliveries acknowledged, so
--   even a forged setting cannot publish an incomplete event.
CREATE FUNCTION outbox.tg_outbox_publications__guarded() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_event uuid;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF coalesce(current_setting('pgoutbox.publishing', true), '') <> 'on' THEN
            RAISE EXCEPTION 'immutability violation: publications are written by the publication function only'
                USING ERRCODE = 'OB202', DETAIL = 'insert into outbox.outbox_publications outside outbox._publish_events';
        END IF;
        SELECT n.event_id INTO v_event
          FROM new_publications AS n
         WHERE EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                        WHERE d.event_id = n.event_id AND d.mandatory AND d.status <> 'acknowledged')
            OR NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d WHERE d.event_id = n.event_id)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'immutability violation: event % is not fully acknowledged', v_event
                USING ERRCODE = 'OB202', DETAIL = 'a publication needs every mandatory delivery of its event acknowledged';
        END IF;
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.outbox_publications is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'published_at is set once, by the publication function only';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_publications__guarded() FROM PUBLIC;

CREATE TRIGGER tg_outbox_publications__guarded_insert AFTER INSERT ON outbox.outbox_publications
    REFERENCING NEW TABLE AS new_publications
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE TRIGGER tg_outbox_publications__guarded BEFORE UPDATE OR DELETE ON outbox.outbox_publications
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE TRIGGER tg_outbox_publications__no_truncate BEFORE TRUNCATE ON outbox.outbox_publications
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
