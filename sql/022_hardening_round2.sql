-- Hardening, second round (SPEC R-SEC-3, R-AK-4, T-5):
--  * the publications trigger no longer trusts the session setting pgoutbox.publishing (any
--    session may set it): it accepts an INSERT only from the publishing statement of
--    outbox._publish_events, read from PostgreSQL's call stack, and still only for events whose
--    mandatory deliveries are all acknowledged. _publish_events stops setting it and pins its
--    search_path (it is then always named outbox._publish_events in that stack).
--  * the registry trigger's message names the table with its schema (inbox.consumer_roles was
--    reported as outbox.consumer_roles).
-- Both trigger functions are CREATE OR REPLACE (the triggers stay); no table changes, no locks
-- beyond the function catalog.
SET LOCAL ROLE outbox_owner;

-- outbox.tg_registry__immutable(): the function of the registry immutability triggers
-- (triggers/delivery_registry__immutable.sql and kernel_tables__no_truncate.sql create them on
-- outbox and inbox tables; a migration that changes the function re-includes only this file).
-- Its message names the table with its schema (inbox.consumer_roles is guarded too). SPEC R-SEC-3.
CREATE OR REPLACE FUNCTION outbox.tg_registry__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'delivery_set_versions' THEN
        IF (NEW.delivery_set_version, NEW.definition_schema_version, NEW.digest_algorithm_version,
            NEW.definition_digest, NEW.definition, NEW.source_release, NEW.registered_at)
           IS NOT DISTINCT FROM
           (OLD.delivery_set_version, OLD.definition_schema_version, OLD.digest_algorithm_version,
            OLD.definition_digest, OLD.definition, OLD.source_release, OLD.registered_at)
           AND NEW.status IN ('active', 'retired') THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on %.% is not allowed', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'registry rows are immutable; only a definition''s status/activated_at change, through activate_delivery_set';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_registry__immutable() FROM PUBLIC;

-- outbox.tg_outbox_publications__guarded(): the function of the publication triggers
-- (triggers/outbox_publications__guarded.sql creates the triggers; a migration that changes the
-- function re-includes only this file). SPEC R-AK-4, T-5, HP-4.
-- Who may insert: only the publishing statement of outbox._publish_events. The trigger reads the
--   call stack (GET DIAGNOSTICS PG_CONTEXT, once per statement) and requires the frame below it
--   to be exactly that statement, called from that function - a frame PostgreSQL writes and no
--   session can forge (a session setting could be; the guard trusts none). Even then every new
--   row's event must have all mandatory deliveries acknowledged.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_publications__guarded() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
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
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_publications__guarded() FROM PUBLIC;


DROP FUNCTION outbox._publish_events(uuid[], timestamptz);
-- outbox._publish_events(p_event_ids uuid[], p_now timestamptz) RETURNS uuid[]
-- (private, SPEC R-AK-3, R-AK-4, R-AK-9, T-5, HP-4, §2 publication table)
-- Purpose: the publication function, set-based, called by ack_deliveries in the ack's transaction:
--   returns the events of p_event_ids that are published (now or before). An event whose
--   mandatory deliveries are all acknowledged gets its one row in outbox.outbox_publications
--   (inserted once, never changed; published_at = clock_timestamp()); the others stay unpublished.
-- SQLSTATEs: OB002 an acknowledged delivery's ack fields are inconsistent with the event or its
--   frozen member (only possible by tampering).
-- Locking: events that may still have an open delivery FOR NO KEY UPDATE in event_id order;
--   lock order everywhere: deliveries, then events.
-- Design notes (locking, clock, immutability): docs/contract.md#outbox_publish_events
-- Caller: outbox.ack_deliveries (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._publish_events(p_event_ids uuid[], p_now timestamptz)
RETURNS uuid[]
LANGUAGE plpgsql
VOLATILE
-- search_path pinned (one GUC save/restore per batch): the function is then always compiled
-- under it, so PostgreSQL names it outbox._publish_events(...) in the call stack the
-- publications trigger checks.
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_bad      text;
    v_complete uuid[];
    v_open     uuid[];
    v_more     uuid[];
BEGIN
    IF p_event_ids IS NULL OR pg_catalog.cardinality(p_event_ids) = 0 THEN
        RETURN '{}'::uuid[];
    END IF;

    -- count every event's open mandatory and inconsistent acknowledged deliveries (one statement)
    SELECT pg_catalog.array_agg(c.event_id) FILTER (WHERE c.open_mandatory = 0),
           pg_catalog.array_agg(c.event_id ORDER BY c.event_id) FILTER (WHERE c.open_mandatory > 0),
           pg_catalog.min(c.bad)
      INTO v_complete, v_open, v_bad
      FROM (SELECT DISTINCT x.event_id FROM pg_catalog.unnest(p_event_ids) AS x(event_id)) AS u
     CROSS JOIN LATERAL (
            SELECT u.event_id,
                   pg_catalog.count(*) FILTER (WHERE d.mandatory AND d.status <> 'acknowledged') AS open_mandatory,
                   pg_catalog.min(d.destination || '/' || d.event_id::text)
                       FILTER (WHERE d.status = 'acknowledged'
                                 AND (d.ack_event_envelope_sha256 IS DISTINCT FROM e.event_envelope_sha256
                                      OR d.ack_event_envelope_digest_algorithm_version IS DISTINCT FROM e.event_envelope_digest_algorithm_version
                                      OR d.ack_consumer_name IS DISTINCT FROM d.consumer_name
                                      OR d.ack_receipt_type IS DISTINCT FROM d.expected_receipt_type
                                      OR d.ack_receipt_schema_version IS DISTINCT FROM d.expected_receipt_schema_version
                                      OR d.ack_receipt_digest IS NULL)) AS bad
              FROM outbox.outbox_deliveries AS d
              LEFT JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
             WHERE d.event_id = u.event_id
          ) AS c;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'ack rejected: publication invalid'
            USING ERRCODE = 'OB002',
                  DETAIL = pg_catalog.format('publication invalid: acknowledged delivery %s does not match its event or frozen member', v_bad);
    END IF;

    -- events with another mandatory delivery open in this view: lock, then count again
    IF v_open IS NOT NULL THEN
        PERFORM 1
           FROM outbox.outbox_events AS e
          WHERE e.event_id = ANY (v_open)
            AND NOT EXISTS (SELECT 1 FROM outbox.outbox_publications AS p WHERE p.event_id = e.event_id)
          ORDER BY e.event_id
            FOR NO KEY UPDATE OF e;
        SELECT pg_catalog.array_agg(u.event_id) INTO v_more
          FROM pg_catalog.unnest(v_open) AS u(event_id)
         WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                            WHERE d.event_id = u.event_id AND d.mandatory AND d.status <> 'acknowledged');
        v_complete := coalesce(v_complete, '{}'::uuid[]) || coalesce(v_more, '{}'::uuid[]);
    END IF;
    IF v_complete IS NULL OR pg_catalog.cardinality(v_complete) = 0 THEN
        RETURN '{}'::uuid[];
    END IF;

    -- the publications trigger accepts exactly this statement text from this function: keep it on one line, unchanged
    INSERT INTO outbox.outbox_publications (event_id, published_at) SELECT u.event_id, pg_catalog.clock_timestamp() FROM pg_catalog.unnest(v_complete) AS u(event_id) ON CONFLICT (event_id) DO NOTHING;
    RETURN v_complete;
END
$fn$;

COMMENT ON FUNCTION outbox._publish_events(uuid[], timestamptz) IS
    'Private: publication CAS for a set of events in one statement - a publication row (stamped with the clock at the publishing statement) once every mandatory delivery is acknowledged; OB002 when an ack is inconsistent (SPEC R-AK-4, R-AK-9, HP-4).';
REVOKE ALL ON FUNCTION outbox._publish_events(uuid[], timestamptz) FROM PUBLIC;


RESET ROLE;
