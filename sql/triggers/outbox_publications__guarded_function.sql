-- outbox.tg_outbox_publications__guarded(): the function of the publication triggers
-- (triggers/outbox_publications__guarded.sql creates the triggers; a migration that changes the
-- function re-includes only this file). SPEC R-AK-4, T-5, HP-4.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_publications__guarded() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
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
         CROSS JOIN LATERAL (
                SELECT pg_catalog.count(*) AS total,
                       pg_catalog.count(*) FILTER (WHERE d.mandatory AND d.status <> 'acknowledged') AS open
                  FROM outbox.outbox_deliveries AS d
                 WHERE d.event_id = n.event_id
              ) AS c
         WHERE c.total = 0 OR c.open > 0
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

