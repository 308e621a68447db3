-- Operator and auditor read-only views and stats (SPEC R-DP-4, R-DP-6, issue "Go dispatcher" §8).
-- Read-only by design: nothing here can skip, force-succeed or edit a delivery (seed 000, manual
-- disposition). The views run with the owner's rights, so outbox_auditor needs no table grant.
SET LOCAL ROLE outbox_owner;

-- Non-terminal rows per destination, for outbox.delivery_stats (cheap scrape: O(backlog)).
CREATE INDEX outbox_deliveries_stats_nonterminal
    ON outbox.outbox_deliveries (destination, status, created_at)
    WHERE status IN ('pending', 'leased');

-- outbox.delivery_stats() RETURNS TABLE (...)  (public, SPEC R-DP-4)
-- Purpose: cheap per-destination backlog figures for the dispatcher's metrics and readiness:
--   pending and leased counts, the oldest non-terminal delivery (pending or leased, i.e. not yet
--   delivered) and its age, unresolved quarantines, and the oldest open revision gap: the age
--   of the oldest non-terminal delivery whose last outcome was awaiting_revision (R-AK-5: such
--   a delivery never exhausts, so its wait must stay visible). One row per registered destination,
--   zeros when it has no work.
-- Cost: reads only non-terminal rows through the partial index
--   outbox_deliveries_open (status IN ('pending','leased'), with status, created_at and
--   last_error_code included), so a scrape costs
--   O(backlog), never O(history); acknowledged totals are deliberately not computed here (use the
--   outbox.delivery_status view, an operator read). Unresolved quarantines are counted from
--   outbox_quarantine, which stays small by design (every row is an open case).
-- Time: now() (the statement's transaction start), so every row of one call shares one clock.
-- Locking: none (plain MVCC reads); no fencing (read-only).
-- SQLSTATEs: none of its own.
-- Callers: outbox_dispatcher (metrics, start-up preflight), outbox_auditor.
CREATE FUNCTION outbox.delivery_stats()
RETURNS TABLE (
    destination                text,
    consumer_name              text,
    receipt_kind               text,
    pending_count              bigint,
    leased_count               bigint,
    oldest_pending_at          timestamptz,
    oldest_pending_age_seconds double precision,
    quarantined_unresolved     bigint,
    oldest_gap_age_seconds     double precision
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    WITH v_work AS (
        SELECT d.destination AS v_destination,
               count(*) FILTER (WHERE d.status = 'pending') AS v_pending,
               count(*) FILTER (WHERE d.status = 'leased')  AS v_leased,
               min(d.created_at)                            AS v_oldest,
               min(d.created_at) FILTER (WHERE d.last_error_code = 'awaiting_revision') AS v_oldest_gap
        FROM outbox.outbox_deliveries d
        WHERE d.status IN ('pending', 'leased')
        GROUP BY d.destination
    ), v_quarantine AS (
        SELECT q.destination AS v_destination, count(*) AS v_open
        FROM outbox.outbox_quarantine q
        WHERE q.acknowledged_at IS NULL
        GROUP BY q.destination
    )
    SELECT dd.destination,
           dd.consumer_name,
           dd.receipt_kind,
           COALESCE(w.v_pending, 0)::bigint,
           COALESCE(w.v_leased, 0)::bigint,
           w.v_oldest,
           COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - w.v_oldest)), 0), 0)::double precision,
           COALESCE(qq.v_open, 0)::bigint,
           COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - w.v_oldest_gap)), 0), 0)::double precision
    FROM outbox.delivery_destinations dd
    LEFT JOIN v_work w ON w.v_destination = dd.destination
    LEFT JOIN v_quarantine qq ON qq.v_destination = dd.destination
    ORDER BY dd.destination;
END
$fn$;

COMMENT ON FUNCTION outbox.delivery_stats() IS
    'Per-destination pending/leased counts, oldest undelivered age and open quarantines, from non-terminal rows only (cheap per scrape). SPEC R-DP-4. Callers: outbox_dispatcher, outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.delivery_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.delivery_stats() TO outbox_dispatcher, outbox_auditor;

-- outbox.active_delivery_set() RETURNS TABLE (...)  (public, SPEC R-DS-5, R-DP-6)
-- Purpose: the quartet of the one active delivery-set version, or no row when none is active.
--   The dispatcher refuses to start, and /readyz answers 503, while it returns no row.
-- Locking: none (plain read); no fencing.
-- SQLSTATEs: none of its own.
-- Callers: outbox_dispatcher, outbox_auditor.
CREATE FUNCTION outbox.active_delivery_set()
RETURNS TABLE (
    delivery_set_version      integer,
    definition_schema_version integer,
    digest_algorithm_version  text,
    definition_digest         text,
    activated_at              timestamptz,
    source_release            text
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT v.delivery_set_version, v.definition_schema_version, v.digest_algorithm_version,
           v.definition_digest, v.activated_at, v.source_release
    FROM outbox.delivery_set_versions v
    WHERE v.status = 'active';
END
$fn$;

COMMENT ON FUNCTION outbox.active_delivery_set() IS
    'The active delivery-set quartet (no row when none is active). SPEC R-DS-5, R-DP-6. Callers: outbox_dispatcher, outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.active_delivery_set() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.active_delivery_set() TO outbox_dispatcher, outbox_auditor;


-- Per destination: counts by status, oldest undelivered (pending or leased) delivery and its
-- age, open quarantines. A full read of outbox_deliveries: an operator query (outboxctl status),
-- not a metrics scrape (that is outbox.delivery_stats).
CREATE VIEW outbox.delivery_status AS
SELECT dd.destination,
       dd.consumer_name,
       count(d.event_id) FILTER (WHERE d.status = 'pending')      AS pending,
       count(d.event_id) FILTER (WHERE d.status = 'leased')       AS leased,
       count(d.event_id) FILTER (WHERE d.status = 'acknowledged') AS acknowledged,
       count(d.event_id) FILTER (WHERE d.status = 'quarantined')  AS quarantined,
       min(d.created_at) FILTER (WHERE d.status IN ('pending', 'leased')) AS oldest_pending_at,
       COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - min(d.created_at) FILTER (WHERE d.status IN ('pending', 'leased')))), 0), 0)::double precision
           AS oldest_pending_age_seconds
FROM outbox.delivery_destinations dd
LEFT JOIN outbox.outbox_deliveries d ON d.destination = dd.destination
GROUP BY dd.destination, dd.consumer_name;
COMMENT ON VIEW outbox.delivery_status IS
    'Per-destination pending/leased/acknowledged/quarantined counts and oldest undelivered age (operator read, outboxctl status). Read-only.';

-- Quarantined deliveries, newest first, with their reason and the last error seen.
CREATE VIEW outbox.quarantined_deliveries AS
SELECT q.destination,
       q.event_id,
       e.event_type,
       e.schema_version,
       q.reason,
       d.last_error_code,
       d.attempt_count,
       q.quarantined_at,
       q.acknowledged_at,
       q.case_id
FROM outbox.outbox_quarantine q
JOIN outbox.outbox_deliveries d ON d.destination = q.destination AND d.event_id = q.event_id
JOIN outbox.outbox_events e ON e.event_id = q.event_id
ORDER BY q.quarantined_at DESC, q.destination, q.event_id;
COMMENT ON VIEW outbox.quarantined_deliveries IS
    'Quarantined deliveries with reason, last error code and attempt count, newest first (operator read, outboxctl status). Read-only.';

REVOKE ALL ON outbox.delivery_status, outbox.quarantined_deliveries FROM PUBLIC;
GRANT SELECT ON outbox.delivery_status, outbox.quarantined_deliveries TO outbox_auditor;

RESET ROLE;
