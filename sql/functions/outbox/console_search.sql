CREATE OR REPLACE FUNCTION outbox.console_search(p_kind text, p_value text, p_from timestamp with time zone, p_to timestamp with time zone, p_before_at timestamp with time zone, p_before_id uuid, p_limit integer)
 RETURNS TABLE(event_id uuid, event_type text, aggregate_id text, correlation_id text, operation_id text, created_at timestamp with time zone, destination text, status text, error_code text, at timestamp with time zone, cursor_id uuid)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_column text;
    v_range text := '';
    v_cursor text := '';
    v_branches text[];
    v_state text;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('eventId', 'aggregateId', 'correlationId', 'operationId', 'eventType',
                                        'destination', 'errorCode', 'timeRange') THEN
        RAISE EXCEPTION 'console_search: unknown kind %', COALESCE(p_kind, 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'eventId, aggregateId, correlationId, operationId, eventType, destination, errorCode or timeRange';
    END IF;
    IF p_kind = 'timeRange' THEN
        IF p_value IS NOT NULL OR p_from IS NULL OR p_to IS NULL THEN
            RAISE EXCEPTION 'console_search: timeRange takes no value and both bounds' USING ERRCODE = '22023';
        END IF;
    ELSIF p_value IS NULL OR p_value = '' OR pg_catalog.length(p_value) > 200 THEN
        RAISE EXCEPTION 'console_search: the value is 1..200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_kind = 'eventId' AND p_value !~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN
        RAISE EXCEPTION 'console_search: an eventId is a UUID' USING ERRCODE = '22023';
    END IF;
    IF p_from IS NOT NULL AND p_to IS NOT NULL AND p_from >= p_to THEN
        RAISE EXCEPTION 'console_search: the range [from, to) is empty' USING ERRCODE = '22023';
    END IF;
    IF (p_before_at IS NULL) <> (p_before_id IS NULL) THEN
        RAISE EXCEPTION 'console_search: the cursor is (at, cursor_id) of the last row, both or neither'
            USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
        RAISE EXCEPTION 'console_search: limit must be 1..500' USING ERRCODE = '22023';
    END IF;

    IF p_kind = 'eventId' THEN
        RETURN QUERY
        SELECT e.event_id, e.event_type, e.aggregate_id, e.correlation_id, e.operation_id, e.created_at,
               NULL::text, NULL::text, NULL::text, e.created_at, e.event_id
          FROM outbox.outbox_events AS e
         WHERE e.event_id = p_value::uuid
           AND (p_from IS NULL OR e.created_at >= p_from) AND (p_to IS NULL OR e.created_at < p_to)
           AND (p_before_at IS NULL OR (e.created_at, e.event_id) < (p_before_at, p_before_id));
        RETURN;
    END IF;

    IF p_kind IN ('aggregateId', 'correlationId', 'operationId', 'eventType', 'timeRange') THEN
        v_column := CASE p_kind WHEN 'aggregateId' THEN 'aggregate_id' WHEN 'correlationId' THEN 'correlation_id'
                                WHEN 'operationId' THEN 'operation_id' WHEN 'eventType' THEN 'event_type' END;
        RETURN QUERY EXECUTE pg_catalog.format(
            'SELECT e.event_id, e.event_type, e.aggregate_id, e.correlation_id, e.operation_id, e.created_at,
                    NULL::text, NULL::text, NULL::text, e.created_at, e.event_id
               FROM outbox.outbox_events AS e
              WHERE true %s %s %s %s
              ORDER BY e.created_at DESC, e.event_id DESC
              LIMIT $6',
            CASE WHEN v_column IS NULL THEN '' ELSE pg_catalog.format('AND e.%I = $1', v_column) END,
            CASE WHEN p_from IS NULL THEN '' ELSE 'AND e.created_at >= $2' END,
            CASE WHEN p_to IS NULL THEN '' ELSE 'AND e.created_at < $3' END,
            CASE WHEN p_before_at IS NULL THEN '' ELSE 'AND (e.created_at, e.event_id) < ($4, $5)' END)
        USING p_value, p_from, p_to, p_before_at, p_before_id, p_limit;
        RETURN;
    END IF;

    IF p_kind = 'destination' THEN
        v_range := CASE WHEN p_from IS NULL THEN '' ELSE ' AND d.created_at >= $2' END
                || CASE WHEN p_to IS NULL THEN '' ELSE ' AND d.created_at < $3' END;
        v_cursor := CASE WHEN p_before_at IS NULL THEN '' ELSE ' AND (d.created_at, d.event_id) < ($4, $5)' END;
        -- one backwards range of outbox_deliveries_console per state, merged (Merge Append)
        FOREACH v_state IN ARRAY ARRAY['pending', 'leased', 'quarantined', 'acknowledged'] LOOP
            v_branches := v_branches || pg_catalog.format(
                '(SELECT d.destination, d.event_id, d.status, d.last_error_code, d.created_at
                    FROM outbox.outbox_deliveries AS d
                   WHERE d.destination = $1 AND d.status = %L%s%s
                   ORDER BY d.created_at DESC, d.event_id DESC LIMIT $6)', v_state, v_range, v_cursor);
        END LOOP;
        RETURN QUERY EXECUTE pg_catalog.format(
            'SELECT e.event_id, e.event_type, e.aggregate_id, e.correlation_id, e.operation_id, e.created_at,
                    u.destination, u.status, u.last_error_code, u.created_at, u.event_id
               FROM (SELECT * FROM (%s) AS m ORDER BY m.created_at DESC, m.event_id DESC LIMIT $6) AS u
               JOIN outbox.outbox_events AS e ON e.event_id = u.event_id
              ORDER BY u.created_at DESC, u.event_id DESC',
            pg_catalog.array_to_string(v_branches, ' UNION ALL '))
        USING p_value, p_from, p_to, p_before_at, p_before_id, p_limit;
        RETURN;
    END IF;

    -- errorCode: the failed attempts with this code, newest first; then one primary-key lookup
    -- each (LIMIT 1 keeps each lookup a per-row subquery the planner does not turn into a join
    -- that scans the starts)
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT e.event_id, e.event_type, e.aggregate_id, e.correlation_id, e.operation_id, e.created_at,
                s.destination, d.status, f.normalized_error_code, f.finished_at, f.attempt_id
           FROM (SELECT f0.attempt_id, f0.finished_at, f0.normalized_error_code
                   FROM outbox.outbox_delivery_attempt_finishes AS f0
                  WHERE f0.normalized_error_code = $1%s%s%s
                  ORDER BY f0.finished_at DESC, f0.attempt_id DESC LIMIT $6) AS f
          CROSS JOIN LATERAL (SELECT s0.destination, s0.event_id FROM outbox.outbox_delivery_attempt_starts AS s0
                               WHERE s0.attempt_id = f.attempt_id LIMIT 1) AS s
          CROSS JOIN LATERAL (SELECT d0.status FROM outbox.outbox_deliveries AS d0
                               WHERE d0.destination = s.destination AND d0.event_id = s.event_id LIMIT 1) AS d
          CROSS JOIN LATERAL (SELECT e0.* FROM outbox.outbox_events AS e0 WHERE e0.event_id = s.event_id LIMIT 1) AS e
          ORDER BY f.finished_at DESC, f.attempt_id DESC',
        CASE WHEN p_from IS NULL THEN '' ELSE ' AND f0.finished_at >= $2' END,
        CASE WHEN p_to IS NULL THEN '' ELSE ' AND f0.finished_at < $3' END,
        CASE WHEN p_before_at IS NULL THEN '' ELSE ' AND (f0.finished_at, f0.attempt_id) < ($4, $5)' END)
    USING p_value, p_from, p_to, p_before_at, p_before_id, p_limit;
END
$function$;

COMMENT ON FUNCTION outbox.console_search(text, text, timestamp with time zone, timestamp with time zone, timestamp with time zone, uuid, integer) IS
    'Operator console search by eventId, aggregateId, correlationId, operationId, eventType, destination, errorCode or a time range: exact, newest first, keyset paged, one index range per kind. 22023 bad kind/value/range/cursor/limit. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_search(text, text, timestamp with time zone, timestamp with time zone, timestamp with time zone, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_search(text, text, timestamp with time zone, timestamp with time zone, timestamp with time zone, uuid, integer) TO outbox_auditor;
