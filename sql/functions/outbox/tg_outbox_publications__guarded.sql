-- outbox.tg_outbox_publications__guarded(): the function of the publication triggers
-- (sql/triggers/outbox/outbox_publications.sql). SPEC R-AK-4, T-5, HP-4.
-- Who may insert: only the publishing statement of outbox._publish_events. The trigger reads the
--   call stack (GET DIAGNOSTICS PG_CONTEXT, once per statement) and requires the frame below it
--   to be exactly that statement, called from that function - a frame PostgreSQL writes and no
--   session can forge (a session setting could be; the guard trusts none). Even then every new
--   row's event must have all mandatory deliveries acknowledged.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_publications__guarded()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
DECLARE
    v_event   uuid;
    v_context text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        GET DIAGNOSTICS v_context = PG_CONTEXT;
        -- line 1 is this trigger; then the statement that fired it and the function it ran in
        IF pg_catalog.strpos(v_context, E'\n') = 0 OR pg_catalog.strpos(v_context, E'\n' || 'SQL statement "INSERT INTO outbox.outbox_publications (event_id, published_at) '
                                  'SELECT u.event_id, pg_catalog.clock_timestamp() FROM pg_catalog.unnest(v_complete) AS u(event_id) '
                                  'ON CONFLICT (event_id) DO NOTHING"' || E'\n'
                                  'PL/pgSQL function outbox._publish_events(uuid[],timestamp with time zone) line ')
           <> pg_catalog.strpos(v_context, E'\n') THEN
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
$function$;

REVOKE ALL ON FUNCTION outbox.tg_outbox_publications__guarded() FROM PUBLIC;
