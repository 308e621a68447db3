-- outbox.search_exact_id(kind text, id text)
--   RETURNS TABLE (result text, reason text, event_id uuid, operation_id text)
--   (public, SPEC R-OP-3, R-PV-2, R-OB-4)
-- Purpose: exact-identifier search, never a prefix or fuzzy match: eventId in the source events
--   (hot and archived), the other kinds in the exact-id index of each projection's ACTIVE version,
--   observationId in the intake's id registry. 'matched' per event; 'not_found' only under a
--   verified_current complete proof; else 'inconclusive' with the reason.
-- Cost: a no-match answer re-checks the proof: O(events in scope).
-- Locking: none. SQLSTATEs: 22023 unknown kind, empty/over-long id, eventId not a UUID.
-- Design notes (the answers and their reasons): docs/read-model.md#outboxsearch_exact_id
-- Caller: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.search_exact_id(p_kind text, p_id text)
 RETURNS TABLE(result text, reason text, event_id uuid, operation_id text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_event   uuid;
    v_found   boolean := false;
    v_m       outbox.completeness_manifests%ROWTYPE;
    v_check   record;
    v_guards  jsonb;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('eventId', 'operationId', 'correlationId', 'runId', 'reservationId', 'causationId', 'observationId') THEN
        RAISE EXCEPTION 'search_exact_id: unknown id kind %', pg_catalog.left(coalesce(p_kind, 'NULL'), 64)
            USING ERRCODE = '22023',
                  HINT = 'eventId, operationId, correlationId, runId, reservationId, causationId or observationId';
    END IF;
    IF p_id IS NULL OR p_id = '' OR pg_catalog.length(p_id) > 200 THEN
        RAISE EXCEPTION 'search_exact_id: id must be 1..200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_kind = 'observationId' THEN
        IF p_id !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
            RAISE EXCEPTION 'search_exact_id: an observationId is a lower-case UUID' USING ERRCODE = '22023';
        END IF;
        RETURN QUERY
        SELECT CASE WHEN EXISTS (SELECT 1 FROM intake.observation_ids AS o WHERE o.observation_id = p_id::uuid)
                    THEN 'matched' ELSE 'inconclusive' END::text,
               'positive_match_only'::text, NULL::uuid, NULL::text;
        RETURN;
    END IF;
    IF p_kind = 'eventId' THEN
        IF p_id !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
            RAISE EXCEPTION 'search_exact_id: an eventId is a lower-case UUID' USING ERRCODE = '22023';
        END IF;
        v_event := p_id::uuid;
        RETURN QUERY
        SELECT 'matched'::text, NULL::text, s.event_id,
               (SELECT x.operation_id FROM inbox.projection_exact_ids AS x
                 WHERE x.id_kind = 'eventId' AND x.id_value = p_id AND x.operation_id IS NOT NULL
                   AND x.projection_version = coalesce((SELECT pv.projection_version FROM outbox.projection_versions AS pv
                                                         WHERE pv.projection_name = x.projection_name AND pv.state = 'active'),
                                                        x.projection_version)
                 ORDER BY x.operation_id COLLATE "C" LIMIT 1)
          FROM (SELECT e.event_id FROM outbox.outbox_events AS e WHERE e.event_id = v_event
                UNION ALL
                SELECT a.event_id FROM outbox.archived_events AS a WHERE a.event_id = v_event) AS s;
        v_found := FOUND;
    ELSE
        RETURN QUERY
        SELECT 'matched'::text, NULL::text, x.event_id, pg_catalog.max(x.operation_id COLLATE "C")
          FROM inbox.projection_exact_ids AS x
         WHERE x.id_kind = p_kind AND x.id_value = p_id
           AND x.projection_version = coalesce((SELECT pv.projection_version FROM outbox.projection_versions AS pv
                                                 WHERE pv.projection_name = x.projection_name AND pv.state = 'active'),
                                                x.projection_version)
         GROUP BY x.event_id
         ORDER BY x.event_id;
        v_found := FOUND;
    END IF;
    IF v_found THEN
        RETURN;
    END IF;

    SELECT * INTO v_m FROM outbox.completeness_manifests AS c
     WHERE c.source_filter = '{}' ORDER BY c.taken_at DESC, c.manifest_id DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'inconclusive'::text, 'no_completed_snapshot'::text, NULL::uuid, NULL::text;
        RETURN;
    END IF;
    SELECT * INTO v_check FROM outbox.check_completeness(v_m.manifest_id);
    IF v_check.freshness = 'stale' THEN
        RETURN QUERY SELECT 'inconclusive'::text, 'stale_snapshot'::text, NULL::uuid, NULL::text;
        RETURN;
    ELSIF v_check.freshness <> 'verified_current' THEN
        RETURN QUERY SELECT 'inconclusive'::text, 'no_completed_snapshot'::text, NULL::uuid, NULL::text;
        RETURN;
    END IF;
    IF v_m.status = 'complete_for_supported_scope' THEN
        -- The index kinds need the projector's index in THIS database to cover every event the
        -- projector acknowledged (its inbox may live elsewhere, or a projector may not index):
        -- an acknowledged projection delivery without an index row is a source gap.
        IF p_kind <> 'eventId' AND (
               EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                        WHERE d.required_projection_name IS NOT NULL AND d.status = 'acknowledged'
                          AND NOT EXISTS (SELECT 1 FROM inbox.projection_exact_ids AS x
                                           WHERE x.consumer_name = d.consumer_name
                                             AND x.projection_name = d.required_projection_name
                                             AND x.projection_version = coalesce(
                                                     (SELECT pv.projection_version FROM outbox.projection_versions AS pv
                                                       WHERE pv.projection_name = d.required_projection_name AND pv.state = 'active'),
                                                     d.required_projection_version)
                                             AND x.event_id = d.event_id))
            OR EXISTS (SELECT 1 FROM outbox.archived_deliveries AS a
                        WHERE a.status = 'acknowledged' AND (a.row_image ->> 'required_projection_name') IS NOT NULL
                          AND NOT EXISTS (SELECT 1 FROM inbox.projection_exact_ids AS x
                                           WHERE x.consumer_name = a.row_image ->> 'consumer_name'
                                             AND x.projection_name = a.row_image ->> 'required_projection_name'
                                             AND x.projection_version = coalesce(
                                                     (SELECT pv.projection_version FROM outbox.projection_versions AS pv
                                                       WHERE pv.projection_name = a.row_image ->> 'required_projection_name' AND pv.state = 'active'),
                                                     (a.row_image ->> 'required_projection_version')::integer)
                                             AND x.event_id = a.event_id))) THEN
            RETURN QUERY SELECT 'inconclusive'::text, 'source_gap'::text, NULL::uuid, NULL::text;
            RETURN;
        END IF;
        RETURN QUERY SELECT 'not_found'::text, NULL::text, NULL::uuid, NULL::text;
        RETURN;
    END IF;
    -- the guards object only (the document can be tens of MB: never parsed whole)
    v_guards := pg_catalog.split_part(pg_catalog.split_part(v_m.document, ',"kindSets":', 1), '"guards":', 2)::jsonb;
    RETURN QUERY SELECT 'inconclusive'::text,
        CASE WHEN (v_guards #>> '{nonTerminalDeliveries,count}')::bigint > 0 THEN 'pending_deliveries'
             WHEN (v_guards #>> '{openQuarantine,count}')::bigint > 0 THEN 'quarantine_open'
             ELSE 'source_gap' END,
        NULL::uuid, NULL::text;
END
$function$;

COMMENT ON FUNCTION outbox.search_exact_id(text, text) IS
    'Exact-id search (SPEC R-OP-3): matched (event, linked operation) | not_found only under a verified_current complete proof of scope {} | inconclusive with its reason. 22023 on an unknown kind or malformed id. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.search_exact_id(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.search_exact_id(text, text) TO outbox_auditor;
