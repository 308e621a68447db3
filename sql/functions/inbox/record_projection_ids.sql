-- inbox.record_projection_ids(consumer_name text, projection_name text, projection_version int,
--                             event_id uuid, operation_id text, ids json) RETURNS void
-- Purpose (SPEC R-OP-1): inside the projector's own transaction (with its receipt and its
--   mutation), index every exact identifier of an applied event and bump the projection run
--   summary. ids: {kind: value | [values]} with kind one of eventId, operationId,
--   correlationId, runId, reservationId, causationId (values 1..200 characters, at most 16 per
--   call). operation_id: the operation the event is linked to (NULL while unlinked); a later
--   call for the same event and id fills a NULL link in, never replaces a set one.
-- The run summary counts applied events: a call for an event already indexed (a link) does
--   not count again.
-- Locking: the run summary row of the projection (row lock until commit).
-- SQLSTATEs: 42501 consumer not bound to the caller (R-SEC-5); 22023 malformed ids.
-- Caller: outbox_consumer (the projector's role).
CREATE OR REPLACE FUNCTION inbox.record_projection_ids(p_consumer_name text, p_projection_name text, p_projection_version integer, p_event_id uuid, p_operation_id text, p_ids json)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_rows  jsonb;
    v_known boolean;
BEGIN
    PERFORM inbox._inbox_check_caller(p_consumer_name);
    IF p_event_id IS NULL OR p_projection_name IS NULL OR p_projection_version IS NULL
       OR p_ids IS NULL OR pg_catalog.json_typeof(p_ids) <> 'object'
       OR (p_operation_id IS NOT NULL AND pg_catalog.length(p_operation_id) NOT BETWEEN 1 AND 200) THEN
        RAISE EXCEPTION 'record_projection_ids: event_id, projection and an ids object are required' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('k', k.key, 'v', v.value)), '[]')
      INTO v_rows
      FROM pg_catalog.json_each(p_ids) AS k
     CROSS JOIN LATERAL pg_catalog.json_array_elements(
         CASE WHEN pg_catalog.json_typeof(k.value) = 'array' THEN k.value ELSE pg_catalog.json_build_array(k.value) END) AS v;
    IF pg_catalog.jsonb_array_length(v_rows) > 16
       OR EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(v_rows) AS r
                   WHERE r ->> 'k' NOT IN ('eventId', 'operationId', 'correlationId', 'runId', 'reservationId', 'causationId')
                      OR pg_catalog.jsonb_typeof(r -> 'v') <> 'string'
                      OR pg_catalog.length(r ->> 'v') NOT BETWEEN 1 AND 200) THEN
        RAISE EXCEPTION 'record_projection_ids: ids must map known kinds to 1..200-character strings (at most 16)'
            USING ERRCODE = '22023';
    END IF;
    SELECT EXISTS (SELECT 1 FROM inbox.projection_exact_ids AS x
                    WHERE x.consumer_name = p_consumer_name AND x.projection_name = p_projection_name
                      AND x.projection_version = p_projection_version AND x.event_id = p_event_id)
      INTO v_known;
    INSERT INTO inbox.projection_exact_ids AS x
           (consumer_name, projection_name, projection_version, id_kind, id_value, event_id, operation_id)
    SELECT DISTINCT p_consumer_name, p_projection_name, p_projection_version, r ->> 'k', r ->> 'v', p_event_id, p_operation_id
      FROM pg_catalog.jsonb_array_elements(v_rows) AS r
    ON CONFLICT (consumer_name, projection_name, projection_version, id_kind, id_value, event_id) DO NOTHING;
    -- A link fills the operation in on every index row of the event (ids recorded while unlinked).
    IF p_operation_id IS NOT NULL THEN
        UPDATE inbox.projection_exact_ids AS x SET operation_id = p_operation_id
         WHERE x.consumer_name = p_consumer_name AND x.projection_name = p_projection_name
           AND x.projection_version = p_projection_version AND x.event_id = p_event_id AND x.operation_id IS NULL;
    END IF;
    IF v_known THEN
        RETURN; -- a later link of an event already applied: not another apply
    END IF;
    INSERT INTO inbox.projection_run_summaries AS s
           (consumer_name, projection_name, projection_version, last_applied_at, last_event_id, applied_events)
    VALUES (p_consumer_name, p_projection_name, p_projection_version, pg_catalog.clock_timestamp(), p_event_id, 1)
    ON CONFLICT (consumer_name, projection_name, projection_version)
    DO UPDATE SET last_applied_at = greatest(s.last_applied_at, EXCLUDED.last_applied_at),
                  last_event_id = EXCLUDED.last_event_id,
                  applied_events = s.applied_events + 1;
END
$function$;

COMMENT ON FUNCTION inbox.record_projection_ids(text, text, integer, uuid, text, json) IS
    'The projector''s exact-identifier index and run summary, in the projector''s transaction (SPEC R-OP-1). 42501 consumer not bound to the caller, 22023 malformed ids. Caller: outbox_consumer.';

REVOKE ALL ON FUNCTION inbox.record_projection_ids(text, text, integer, uuid, text, json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_projection_ids(text, text, integer, uuid, text, json) TO outbox_consumer;
