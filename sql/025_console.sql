-- Operator console (issue 25; SPEC R-OP-4, R-AK-10): read functions for the console that
-- `outboxctl serve` renders - delivery detail by event id, keyset-paged delivery lists with
-- bounded counts, and per-destination activity for the charts - all granted to outbox_auditor
-- only (the console's read session). The redeliver action reuses outbox.preview_redelivery and
-- outbox.redeliver_quarantined (outbox_operator) unchanged.
-- Indexes:
--   * outbox_deliveries_console (destination, status, created_at, event_id): keyset pages, oldest
--     first, and bounded counts of one destination's deliveries in one state. No existing index
--     has this order (outbox_deliveries_claimable is by available_at, outbox_deliveries_leased by
--     expiry); without it a page reads and sorts every delivery of the state. Cost on the hot
--     path: every state change (claim, retry, ack, quarantine, recovery) already writes a new row
--     version into the other indexes (status is indexed, so no HOT update); this adds one b-tree
--     insertion per change (about 60 bytes per delivery).
--   * outbox_delivery_attempt_finishes_finished_brin: the charts' last-hour window over the
--     append-only finishes (BRIN: a few pages, negligible write cost).
-- Applied to a running database: CREATE INDEX (not CONCURRENTLY: tern runs a migration in one
-- transaction) takes a SHARE lock on outbox_deliveries and on the finishes while it builds, so
-- claims and acks wait for the build (seconds at 10^6 deliveries); plan it with the dispatchers.
SET LOCAL ROLE outbox_owner;

CREATE INDEX outbox_deliveries_console
    ON outbox.outbox_deliveries (destination, status, created_at, event_id);
CREATE INDEX outbox_delivery_attempt_finishes_finished_brin
    ON outbox.outbox_delivery_attempt_finishes USING brin (finished_at);

-- outbox.console_event(p_event_id uuid)
-- RETURNS TABLE (event_id uuid, event_type text, schema_version text, delivery_set_version integer,
--                ..., occurred_at timestamptz, created_at timestamptz, published_at timestamptz,
--                payload_bytes integer)  (22 columns: see CREATE below)
-- (public, operator console, issue 25 item 1; SPEC R-OP-4, R-AK-4)
-- Purpose: the envelope metadata of one event in the hot tables for the console's delivery
--   detail (type, quartet, aggregate, tenant, ids, digest, times, payload size). Never the payload
--   itself (outbox.console_event_payload). Zero rows for an unknown or archived event id.
-- Cost: primary-key lookups on outbox_events and outbox_publications.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL event id.
-- Design notes: docs/read-model.md#outboxconsole_event
-- Callers: outbox_auditor (the console's read session).
CREATE FUNCTION outbox.console_event(p_event_id uuid)
RETURNS TABLE (event_id uuid, event_type text, schema_version text, delivery_set_version integer,
               definition_schema_version integer, digest_algorithm_version text, definition_digest text,
               aggregate_id text, aggregate_revision bigint, tenant_kind text, tenant_id text,
               workspace_id text, project_id text, correlation_id text, causation_id text, operation_id text,
               event_envelope_digest_algorithm_version text, event_envelope_sha256 text,
               occurred_at timestamptz, created_at timestamptz, published_at timestamptz, payload_bytes integer)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_event_id IS NULL THEN
        RAISE EXCEPTION 'console_event: event_id is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT e.event_id, e.event_type, e.schema_version, e.delivery_set_version,
           e.delivery_set_definition_schema_version, e.delivery_set_definition_digest_algorithm_version,
           e.delivery_set_definition_digest, e.aggregate_id, e.aggregate_revision, e.tenant_kind, e.tenant_id,
           e.workspace_id, e.project_id, e.correlation_id, e.causation_id, e.operation_id,
           e.event_envelope_digest_algorithm_version, e.event_envelope_sha256, e.occurred_at, e.created_at,
           p.published_at, pg_catalog.octet_length(e.event_payload::text)
      FROM outbox.outbox_events AS e
      LEFT JOIN outbox.outbox_publications AS p ON p.event_id = e.event_id
     WHERE e.event_id = p_event_id;
END
$fn$;

COMMENT ON FUNCTION outbox.console_event(uuid) IS
    'Operator console: one event''s envelope metadata, digest, delivery-set quartet and publication time - never the payload. Zero rows when unknown. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.console_event(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_event(uuid) TO outbox_auditor;

-- outbox.console_event_payload(p_event_id uuid) RETURNS jsonb
-- (public, operator console, issue 25 item 1; SPEC R-OP-4 "no payload is shown by default")
-- Purpose: the payload of one event in the hot tables, for the console's explicit "show payload"
--   request. Only outbox_auditor may call it (it may already read envelopes through the view
--   outbox.event_source, so this adds no exposure); the operator, dispatcher and every other
--   role may not. The console calls it only when it was started with -show-payloads and the
--   request asks for it. NULL for an unknown or archived event.
-- Cost: one primary-key lookup.
-- Locking: none (plain MVCC read).
-- SQLSTATEs: 22023 a NULL event id.
-- Callers: outbox_auditor.
CREATE FUNCTION outbox.console_event_payload(p_event_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_payload jsonb;
BEGIN
    IF p_event_id IS NULL THEN
        RAISE EXCEPTION 'console_event_payload: event_id is required' USING ERRCODE = '22023';
    END IF;
    SELECT e.event_payload INTO v_payload FROM outbox.outbox_events AS e WHERE e.event_id = p_event_id;
    RETURN v_payload;
END
$fn$;

COMMENT ON FUNCTION outbox.console_event_payload(uuid) IS
    'Operator console: the payload of one event, only on explicit request (hidden by default). Caller: outbox_auditor only.';
REVOKE ALL ON FUNCTION outbox.console_event_payload(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_event_payload(uuid) TO outbox_auditor;

-- outbox.console_event_deliveries(p_event_id uuid)
-- RETURNS TABLE (destination text, consumer_name text, mandatory boolean, ..., status text, ...,
--                quarantine_reason text, quarantined_at timestamptz, case_id text, recoveries bigint)
--                (29 columns: see CREATE below)
-- (public, operator console, issue 25 item 1; SPEC R-AK-1..10)
-- Purpose: every delivery of one event for the console's detail, in destination order: the frozen
--   member, its state and timing, the lease owner (never the token), the last error, the ack's
--   receipt quartet, its latest quarantine and the number of recoveries.
-- Cost: the deliveries of one event by index, a primary-key lookup each.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL event id.
-- Design notes: docs/read-model.md#outboxconsole_event_deliveries
-- Callers: outbox_auditor.
CREATE FUNCTION outbox.console_event_deliveries(p_event_id uuid)
RETURNS TABLE (destination text, consumer_name text, mandatory boolean, expected_receipt_type text,
               expected_receipt_schema_version integer, projection_state text, required_projection_name text,
               required_projection_version integer, status text, available_at timestamptz, created_at timestamptz,
               attempt_count integer, recovery_attempt_base integer, lease_owner text, lease_expires_at timestamptz,
               last_attempt_at timestamptz, last_error_code text, last_error_ref text, delivered_at timestamptz,
               ack_receipt_kind text, ack_receipt_type text, ack_receipt_ref text, ack_receipt_schema_version integer,
               ack_receipt_digest_algorithm_version text, ack_receipt_digest text,
               quarantine_reason text, quarantined_at timestamptz, case_id text, recoveries bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_event_id IS NULL THEN
        RAISE EXCEPTION 'console_event_deliveries: event_id is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT d.destination, d.consumer_name, d.mandatory, d.expected_receipt_type, d.expected_receipt_schema_version,
           m.projection_state, d.required_projection_name, d.required_projection_version, d.status,
           d.available_at, d.created_at, d.attempt_count, d.recovery_attempt_base, d.lease_owner, d.lease_expires_at,
           d.last_attempt_at, d.last_error_code, d.last_error_ref, d.delivered_at,
           d.ack_receipt_kind, d.ack_receipt_type, d.ack_receipt_ref, d.ack_receipt_schema_version,
           d.ack_receipt_digest_algorithm_version, d.ack_receipt_digest,
           q.reason, q.quarantined_at, q.case_id,
           (SELECT pg_catalog.count(*) FROM outbox.outbox_recoveries AS r
             WHERE r.destination = d.destination AND r.event_id = d.event_id)
      FROM outbox.outbox_deliveries AS d
      JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
      LEFT JOIN outbox.delivery_set_members AS m
             ON m.delivery_set_version = d.delivery_set_version AND m.event_type = e.event_type
            AND m.event_schema_version = e.schema_version AND m.destination = d.destination
      LEFT JOIN LATERAL (SELECT q1.reason, q1.quarantined_at, q1.case_id
                           FROM outbox.outbox_quarantine AS q1
                          WHERE q1.destination = d.destination AND q1.event_id = d.event_id
                          ORDER BY q1.quarantine_id DESC LIMIT 1) AS q ON true
     WHERE d.event_id = p_event_id
     ORDER BY d.destination;
END
$fn$;

COMMENT ON FUNCTION outbox.console_event_deliveries(uuid) IS
    'Operator console: every delivery of one event - frozen member, state, last error code and sanitized ref, receipt quartet, latest quarantine and recovery count; never a lease token. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.console_event_deliveries(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_event_deliveries(uuid) TO outbox_auditor;

-- outbox.console_event_attempts(p_event_id uuid)
-- RETURNS TABLE (destination text, attempt_number integer, attempt_id uuid, worker text,
--                started_at timestamptz, finished_at timestamptz, outcome text,
--                retry_disposition text, error_code text, error_ref text)
-- (public, operator console, issue 25 item 1; SPEC R-CL, R-AK-5..8)
-- Purpose: the attempt history of every delivery of one event: each start (number, worker,
--   time) with its finish when there is one (time, outcome, retry disposition, normalized error
--   code, sanitized error ref); finish columns are NULL for an attempt in flight. Never the lease
--   token or the receipt body. In (destination, attempt_number) order.
-- Cost: the starts of the event's deliveries through the unique index (destination, event_id,
--   attempt_number), one primary-key lookup per finish.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL event id.
-- Callers: outbox_auditor.
CREATE FUNCTION outbox.console_event_attempts(p_event_id uuid)
RETURNS TABLE (destination text, attempt_number integer, attempt_id uuid, worker text, started_at timestamptz,
               finished_at timestamptz, outcome text, retry_disposition text, error_code text, error_ref text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_event_id IS NULL THEN
        RAISE EXCEPTION 'console_event_attempts: event_id is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT s.destination, s.attempt_number, s.attempt_id, s.worker, s.started_at,
           f.finished_at, f.outcome, f.retry_disposition, f.normalized_error_code, f.sanitized_error_ref
      FROM outbox.outbox_deliveries AS d
      JOIN outbox.outbox_delivery_attempt_starts AS s
        ON s.destination = d.destination AND s.event_id = d.event_id
      LEFT JOIN outbox.outbox_delivery_attempt_finishes AS f ON f.attempt_id = s.attempt_id
     WHERE d.event_id = p_event_id
     ORDER BY s.destination, s.attempt_number;
END
$fn$;

COMMENT ON FUNCTION outbox.console_event_attempts(uuid) IS
    'Operator console: every attempt start and finish of one event''s deliveries - worker, times, outcome, disposition, error code, sanitized ref; never a lease token or receipt body. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.console_event_attempts(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_event_attempts(uuid) TO outbox_auditor;

-- outbox.console_deliveries(p_destination text, p_status text, p_after_created_at timestamptz,
--                           p_after_event_id uuid, p_limit integer)
-- RETURNS TABLE (destination text, event_id uuid, event_type text, status text,
--                created_at timestamptz, available_at timestamptz, attempt_count integer,
--                last_attempt_at timestamptz, last_error_code text, lease_owner text,
--                lease_expires_at timestamptz, delivered_at timestamptz)
-- (public, operator console, issue 25 item 2)
-- Purpose: one page of the deliveries of one destination in one state, oldest first by
--   (created_at, event_id), keyset-paginated (pass the last row's pair; both NULL for page one).
-- Cost: an index range scan of at most p_limit rows; never OFFSET.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL destination, an unknown state, only one half of the keyset cursor, or
--   a limit outside 1..500.
-- Design notes (plan): docs/read-model.md#outboxconsole_deliveries   Callers: outbox_auditor.
CREATE FUNCTION outbox.console_deliveries(p_destination text, p_status text, p_after_created_at timestamptz,
                                          p_after_event_id uuid, p_limit integer)
RETURNS TABLE (destination text, event_id uuid, event_type text, status text, created_at timestamptz,
               available_at timestamptz, attempt_count integer, last_attempt_at timestamptz, last_error_code text,
               lease_owner text, lease_expires_at timestamptz, delivered_at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_destination IS NULL OR p_status IS NULL
       OR p_status NOT IN ('pending', 'leased', 'quarantined', 'acknowledged') THEN
        RAISE EXCEPTION 'console_deliveries: a destination and a state (pending, leased, quarantined, acknowledged) are required'
            USING ERRCODE = '22023';
    END IF;
    IF (p_after_created_at IS NULL) <> (p_after_event_id IS NULL) THEN
        RAISE EXCEPTION 'console_deliveries: the cursor is (created_at, event_id) of the last row, both or neither'
            USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
        RAISE EXCEPTION 'console_deliveries: limit must be 1..500' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT d.destination, d.event_id, e.event_type, d.status, d.created_at, d.available_at, d.attempt_count,
                d.last_attempt_at, d.last_error_code, d.lease_owner, d.lease_expires_at, d.delivered_at
           FROM outbox.outbox_deliveries AS d
           JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
          WHERE d.destination = $1 AND d.status = %L %s
          ORDER BY d.created_at, d.event_id
          LIMIT $4',
        p_status,
        CASE WHEN p_after_created_at IS NULL THEN ''
             ELSE 'AND (d.created_at, d.event_id) > ($2, $3)' END)
    USING p_destination, p_after_created_at, p_after_event_id, p_limit;
END
$fn$;

COMMENT ON FUNCTION outbox.console_deliveries(text, text, timestamptz, uuid, integer) IS
    'Operator console: one keyset page (never OFFSET) of a destination''s deliveries in one state, oldest first by (created_at, event_id). 22023 bad state/cursor/limit. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.console_deliveries(text, text, timestamptz, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_deliveries(text, text, timestamptz, uuid, integer) TO outbox_auditor;

-- outbox.console_delivery_counts(p_destination text, p_cap integer)
-- RETURNS TABLE (status text, deliveries bigint, capped boolean)
-- (public, operator console, issue 25 item 2)
-- Purpose: how many deliveries of one destination are in each state (pending, leased,
--   quarantined, acknowledged), for the console's filter tabs. Each count stops at p_cap: a
--   count that reached it comes back as p_cap with capped = true ("10000+"), so the answer costs
--   at most 4 * p_cap index entries however large the history is (an acknowledged history of
--   10^6 rows is not counted row by row on every page view).
-- Cost: four bounded index-only scans of outbox_deliveries_console, at most p_cap + 1 entries
--   each.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL destination or a cap outside 1..1000000.
-- Callers: outbox_auditor.
CREATE FUNCTION outbox.console_delivery_counts(p_destination text, p_cap integer)
RETURNS TABLE (status text, deliveries bigint, capped boolean)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_destination IS NULL OR p_cap IS NULL OR p_cap < 1 OR p_cap > 1000000 THEN
        RAISE EXCEPTION 'console_delivery_counts: a destination and a cap 1..1000000 are required'
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH v_counts (v_status, v_n) AS (
        SELECT 'pending', (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = p_destination AND d.status = 'pending' LIMIT p_cap + 1) AS x)
        UNION ALL
        SELECT 'leased', (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = p_destination AND d.status = 'leased' LIMIT p_cap + 1) AS x)
        UNION ALL
        SELECT 'quarantined', (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = p_destination AND d.status = 'quarantined' LIMIT p_cap + 1) AS x)
        UNION ALL
        SELECT 'acknowledged', (SELECT pg_catalog.count(*) FROM (SELECT 1 FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = p_destination AND d.status = 'acknowledged' LIMIT p_cap + 1) AS x)
    )
    SELECT c.v_status, LEAST(c.v_n, p_cap::bigint), c.v_n > p_cap FROM v_counts AS c;
END
$fn$;

COMMENT ON FUNCTION outbox.console_delivery_counts(text, integer) IS
    'Operator console: deliveries of one destination per state, each count capped at p_cap (capped = true means "at least"), so it stays bounded at any history size. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.console_delivery_counts(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_delivery_counts(text, integer) TO outbox_auditor;

-- outbox.console_activity(p_window interval, p_bucket interval)
-- RETURNS TABLE (destination text, bucket_start timestamptz, finished bigint, acknowledged bigint,
--                retried bigint, quarantined bigint, lease_expired bigint,
--                max_ack_lag_seconds double precision)
-- (public, operator console, issue 25 item 4)
-- Purpose: the console's charts, straight from the database: per destination and p_bucket-wide
--   bucket over the last p_window, the attempts finished and how, and the largest ack lag.
--   Buckets without a finish are not returned.
-- Cost: O(attempts finished in the window) through a BRIN index, never O(history).
-- Time: now(). Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a window outside (0, 24 hours], a bucket outside [10 seconds, 1 hour], or
--   more than 1440 buckets.
-- Design notes: docs/read-model.md#outboxconsole_activity
-- Callers: outbox_auditor.
CREATE FUNCTION outbox.console_activity(p_window interval, p_bucket interval)
RETURNS TABLE (destination text, bucket_start timestamptz, finished bigint, acknowledged bigint, retried bigint,
               quarantined bigint, lease_expired bigint, max_ack_lag_seconds double precision)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_step double precision;
BEGIN
    IF p_window IS NULL OR p_window <= interval '0' OR p_window > interval '24 hours'
       OR p_bucket IS NULL OR p_bucket < interval '10 seconds' OR p_bucket > interval '1 hour'
       OR EXTRACT(EPOCH FROM p_window) / EXTRACT(EPOCH FROM p_bucket) > 1440 THEN
        RAISE EXCEPTION 'console_activity: window must be within (0, 24h], bucket within [10s, 1h], at most 1440 buckets'
            USING ERRCODE = '22023';
    END IF;
    v_step := EXTRACT(EPOCH FROM p_bucket);
    RETURN QUERY
    SELECT s.destination,
           pg_catalog.to_timestamp(pg_catalog.floor(EXTRACT(EPOCH FROM f.finished_at) / v_step) * v_step) AS v_bucket,
           pg_catalog.count(*),
           pg_catalog.count(*) FILTER (WHERE f.outcome = 'acknowledged'),
           pg_catalog.count(*) FILTER (WHERE f.outcome = 'retryable'),
           pg_catalog.count(*) FILTER (WHERE f.outcome = 'non_retryable'),
           pg_catalog.count(*) FILTER (WHERE f.outcome = 'lease_expired_unknown'),
           pg_catalog.max(EXTRACT(EPOCH FROM (f.finished_at - d.created_at))::double precision)
               FILTER (WHERE f.outcome = 'acknowledged')
      FROM outbox.outbox_delivery_attempt_finishes AS f
      JOIN outbox.outbox_delivery_attempt_starts AS s ON s.attempt_id = f.attempt_id
      LEFT JOIN outbox.outbox_deliveries AS d
             ON f.outcome = 'acknowledged' AND d.destination = s.destination AND d.event_id = s.event_id
     WHERE f.finished_at >= now() - p_window
     GROUP BY s.destination, v_bucket
     ORDER BY s.destination, v_bucket;
END
$fn$;

COMMENT ON FUNCTION outbox.console_activity(interval, interval) IS
    'Operator console charts: per destination and time bucket of the last window, attempts finished, acknowledged, retried, quarantined, lease-expired, and the largest ack lag. O(finishes in the window). Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.console_activity(interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_activity(interval, interval) TO outbox_auditor;


RESET ROLE;
