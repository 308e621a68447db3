-- The console operators keep open (issue 41; SPEC R-OP-4, R-PV-2): two read functions for the
-- operator console, both outbox_auditor only, and the indexes that make its search index-backed.
--  * outbox.console_destinations(cap): per destination the live overview's figures in one call,
--    bounded so it can be polled: backlog (pending, leased), the oldest undelivered, open
--    quarantine, open revision gaps (count and oldest) and the claim pause (reason, since, by).
--  * outbox.console_search(kind, value, from, to, cursor, limit): search by what an operator
--    holds - eventId, aggregateId, correlationId, operationId, eventType, destination, errorCode,
--    or a time range alone - newest first, keyset paged (never OFFSET).
-- Indexes (each search kind reads one index range, bench/console_bench_test.go checks the plans
-- at 10^6 deliveries):
--  * outbox_events by aggregate_id, correlation_id (partial: NOT NULL), operation_id (partial)
--    and event_type, each (key, created_at, event_id) so a page is an index range scan read
--    backwards. Cost: four b-tree insertions per appended event (events are never updated).
--  * outbox_delivery_attempt_finishes by normalized_error_code (partial: failed attempts only),
--    (code, finished_at, attempt_id). Cost: one insertion per finish with an error code.
-- Applied to a running database: CREATE INDEX (not CONCURRENTLY: tern runs a migration in one
-- transaction) takes a SHARE lock on outbox_events and on the finishes while it builds, so
-- appends and acks wait for the build; plan it with the producers and dispatchers.
SET LOCAL ROLE outbox_owner;

CREATE INDEX outbox_events_console_aggregate
    ON outbox.outbox_events (aggregate_id, created_at, event_id);
CREATE INDEX outbox_events_console_correlation
    ON outbox.outbox_events (correlation_id, created_at, event_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX outbox_events_console_operation
    ON outbox.outbox_events (operation_id, created_at, event_id) WHERE operation_id IS NOT NULL;
CREATE INDEX outbox_events_console_type
    ON outbox.outbox_events (event_type, created_at, event_id);
CREATE INDEX outbox_delivery_attempt_finishes_console_error
    ON outbox.outbox_delivery_attempt_finishes (normalized_error_code, finished_at, attempt_id)
    WHERE normalized_error_code IS NOT NULL;

-- outbox.console_destinations(p_cap integer)
-- RETURNS TABLE (destination text, consumer_name text, pending_count bigint, leased_count bigint,
--                oldest_pending_at timestamptz, quarantined_open bigint, open_gaps bigint,
--                oldest_gap_at timestamptz, paused_reason text, paused_at timestamptz,
--                paused_by text)
-- (public, operator console, issue 41 item 2; SPEC R-OP-4, R-PV-2)
-- Purpose: the live overview's per-destination figures in one call, cheap enough to poll:
--   backlog (pending, leased), the oldest undelivered delivery, open quarantine, open revision
--   gaps (non-terminal deliveries whose consumer answered awaiting_revision: count and oldest)
--   and the claim pause of outbox.pause_destination_claims (reason, since, by; NULL when claims
--   run). Every count stops at p_cap + 1 (a value above p_cap means "more than p_cap"); the
--   oldest gap is exact while the gaps are at most p_cap, else NULL. One row per registered
--   destination, in name order, zeros when it has no work.
-- Cost: per destination bounded index scans - pending and leased counts and the oldest of each on
--   outbox_deliveries_console (at most p_cap + 1 entries each, the oldest one entry), the gaps on
--   the partial index outbox_deliveries_open (index-only: it includes last_error_code and
--   created_at), the open quarantine on outbox_quarantine_one_open - and the pause by primary
--   key: O(destinations x p_cap) at most, whatever the backlog and history hold.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a cap outside 1..1000000.
-- Callers: outbox_auditor (the console's read session).
CREATE OR REPLACE FUNCTION outbox.console_destinations(p_cap integer)
 RETURNS TABLE(destination text, consumer_name text, pending_count bigint, leased_count bigint, oldest_pending_at timestamp with time zone, quarantined_open bigint, open_gaps bigint, oldest_gap_at timestamp with time zone, paused_reason text, paused_at timestamp with time zone, paused_by text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_cap IS NULL OR p_cap < 1 OR p_cap > 1000000 THEN
        RAISE EXCEPTION 'console_destinations: a cap 1..1000000 is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT dd.destination,
           dd.consumer_name,
           (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM outbox.outbox_deliveries AS d
              WHERE d.destination = dd.destination AND d.status = 'pending' LIMIT p_cap + 1) AS x)::bigint,
           (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM outbox.outbox_deliveries AS d
              WHERE d.destination = dd.destination AND d.status = 'leased' LIMIT p_cap + 1) AS x)::bigint,
           LEAST((SELECT d.created_at FROM outbox.outbox_deliveries AS d
                   WHERE d.destination = dd.destination AND d.status = 'pending' ORDER BY d.created_at LIMIT 1),
                 (SELECT d.created_at FROM outbox.outbox_deliveries AS d
                   WHERE d.destination = dd.destination AND d.status = 'leased' ORDER BY d.created_at LIMIT 1)),
           (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM outbox.outbox_quarantine AS q
              WHERE q.destination = dd.destination AND q.acknowledged_at IS NULL LIMIT p_cap + 1) AS x)::bigint,
           g.v_gaps,
           CASE WHEN g.v_gaps <= p_cap THEN g.v_oldest_gap END,
           p.reason,
           p.paused_at,
           p.paused_by
    FROM outbox.delivery_destinations AS dd
    CROSS JOIN LATERAL (
        SELECT pg_catalog.count(*)::bigint AS v_gaps, pg_catalog.min(x.created_at) AS v_oldest_gap
          FROM (SELECT d.created_at FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = dd.destination AND d.status IN ('pending', 'leased')
                   AND d.last_error_code = 'awaiting_revision'
                 LIMIT p_cap + 1) AS x) AS g
    LEFT JOIN outbox.destination_claim_pauses AS p ON p.destination = dd.destination
    ORDER BY dd.destination;
END
$function$;

COMMENT ON FUNCTION outbox.console_destinations(integer) IS
    'Operator console overview: per destination bounded backlog counts (stop at cap + 1), oldest undelivered, open quarantine, open revision gaps and the claim pause; O(destinations x cap). 22023 bad cap. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_destinations(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_destinations(integer) TO outbox_auditor;

-- outbox.console_search(p_kind text, p_value text, p_from timestamptz, p_to timestamptz,
--                       p_before_at timestamptz, p_before_id uuid, p_limit integer)
-- RETURNS TABLE (event_id uuid, event_type text, aggregate_id text, correlation_id text,
--                operation_id text, created_at timestamptz, destination text, status text,
--                error_code text, at timestamptz, cursor_id uuid)
-- (public, operator console, issue 41 item 3; SPEC R-OP-4)
-- Purpose: find deliveries and events by what an operator holds, exact values only (no prefix,
--   case folding or trimming), newest first, optionally within [p_from, p_to):
--     eventId        the event (hot tables)                                   -> at = created_at
--     aggregateId, correlationId, operationId, eventType   events             -> at = created_at
--     destination    the destination's deliveries in every state            -> at = created_at
--     errorCode      attempts that finished with this normalized error code  -> at = finished_at
--     timeRange      events appended in [p_from, p_to) (p_value NULL, both bounds required)
--   destination, status and error_code are NULL for the event kinds. Keyset paging: pass the last
--   row's (at, cursor_id) as (p_before_at, p_before_id) for the next page (cursor_id is the
--   event id, for errorCode the attempt id); both NULL for the first page. Never OFFSET.
-- Cost: each kind reads one index range backwards, at most p_limit entries (plus the rows
--   before the cursor it skips inside the range): outbox_events_pkey, outbox_events_console_*,
--   the four state ranges of outbox_deliveries_console merged (destination), or
--   outbox_delivery_attempt_finishes_console_error; one primary-key lookup per row on the events
--   (and the starts and deliveries for errorCode). timeRange reads the BRIN index
--   outbox_events_created_brin: O(events in the range). bench/console_bench_test.go checks the
--   plans at 10^6 deliveries. The statement is built per call from a closed list (the column
--   and the state literals), values are parameters.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 an unknown kind; a value NULL, empty or over 200 characters (timeRange: a
--   value given); an eventId not a UUID; p_from not before p_to; timeRange without both bounds;
--   only one half of the cursor; a limit outside 1..500.
-- Callers: outbox_auditor (the console's read session).
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

RESET ROLE;
