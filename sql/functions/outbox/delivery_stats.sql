-- outbox.delivery_stats() RETURNS TABLE (...)  (public, SPEC R-DP-4, R-AK-5)
-- Purpose: cheap per-destination backlog figures for the dispatcher's metrics and readiness:
--   pending and leased counts, the oldest non-terminal delivery and its age, unresolved
--   quarantines, and the age of the oldest open revision gap (awaiting_revision). One row per
--   registered destination, zeros when it has no work.
-- Cost: O(backlog) through the partial index outbox_deliveries_open, never O(history).
-- Time: now(), so every row of one call shares one clock.
-- Locking: none (plain MVCC reads). SQLSTATEs: none of its own.
-- Design notes: docs/operations.md#outboxdelivery_stats
-- Callers: outbox_dispatcher (metrics, start-up preflight), outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.delivery_stats()
 RETURNS TABLE(destination text, consumer_name text, receipt_kind text, pending_count bigint, leased_count bigint, oldest_pending_at timestamp with time zone, oldest_pending_age_seconds double precision, quarantined_unresolved bigint, oldest_gap_age_seconds double precision)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION outbox.delivery_stats() IS
    'Per-destination pending/leased counts, oldest undelivered age and open quarantines, from non-terminal rows only (cheap per scrape). SPEC R-DP-4. Callers: outbox_dispatcher, outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.delivery_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.delivery_stats() TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.delivery_stats() TO outbox_dispatcher;
