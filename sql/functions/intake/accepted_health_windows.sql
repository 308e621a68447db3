-- intake.accepted_health_windows(from_time timestamptz, to_time timestamptz, width interval)
--   RETURNS TABLE (workload_principal_id text, window_start timestamptz, window_end timestamptz,
--                  accepted int, last_accepted_at timestamptz, send_failures int,
--                  intake_rejections int, health text)
--   (public, SPEC R-OB-5, §13)
-- Purpose: health, not coverage: per registered workload and window what the intake heard
--   (accepted, last acceptedAt, send failures, rejections) and health unknown | degraded |
--   healthy. No percentage: there is no authoritative denominator.
-- Locking: none (reads). SQLSTATEs: 22023 from/to NULL or to <= from, width below one minute,
--   more than 10000 windows.
-- Design notes (what each column counts): docs/intake.md#intakeaccepted_health_windows
-- Caller: outbox_auditor.
CREATE OR REPLACE FUNCTION intake.accepted_health_windows(p_from_time timestamp with time zone, p_to_time timestamp with time zone, p_width interval)
 RETURNS TABLE(workload_principal_id text, window_start timestamp with time zone, window_end timestamp with time zone, accepted integer, last_accepted_at timestamp with time zone, send_failures integer, intake_rejections integer, health text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    IF p_from_time IS NULL OR p_to_time IS NULL OR p_to_time <= p_from_time OR p_width IS NULL OR p_width <= interval '0' THEN
        RAISE EXCEPTION 'intake: health window arguments out of bounds'
            USING ERRCODE = '22023', DETAIL = 'from_time < to_time, a positive width';
    END IF;
    IF EXTRACT(epoch FROM (p_to_time - p_from_time)) / EXTRACT(epoch FROM p_width) > 10000 THEN
        RAISE EXCEPTION 'intake: more than 10000 health windows' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH win AS (
        SELECT g AS ws, LEAST(g + p_width, p_to_time) AS we
        FROM pg_catalog.generate_series(p_from_time, p_to_time - interval '1 microsecond', p_width) AS g
    ), cells AS (
        SELECT w.workload_principal_id AS wp, win.ws, win.we
        FROM intake.workloads w CROSS JOIN win
    )
    SELECT c.wp, c.ws, c.we,
           a.n::integer, a.last_at,
           coalesce(sf.n, 0)::integer, coalesce(rj.n, 0)::integer,
           CASE WHEN a.n = 0 AND coalesce(sf.n, 0) = 0 AND coalesce(rj.n, 0) = 0 THEN 'unknown'
                WHEN coalesce(sf.n, 0) > 0 OR coalesce(rj.n, 0) > 0 THEN 'degraded'
                ELSE 'healthy' END
    FROM cells c
    CROSS JOIN LATERAL (SELECT pg_catalog.count(*) AS n, pg_catalog.max(r.accepted_at) AS last_at
                        FROM intake.observation_ids r
                        WHERE r.workload_principal_id = c.wp AND r.accepted_at >= c.ws AND r.accepted_at < c.we) a
    LEFT JOIN LATERAL (SELECT pg_catalog.sum(s.failed) AS n FROM intake.send_failures s
                       WHERE s.workload_principal_id = c.wp AND s.window_start >= c.ws AND s.window_start < c.we) sf ON true
    LEFT JOIN LATERAL (SELECT pg_catalog.sum(x.rejected) AS n FROM intake.intake_rejections x
                       WHERE x.workload_principal_id = c.wp AND x.rejected_at >= c.ws AND x.rejected_at < c.we) rj ON true
    ORDER BY c.wp, c.ws;
END
$function$;

COMMENT ON FUNCTION intake.accepted_health_windows(timestamp with time zone, timestamp with time zone, interval) IS
    'Per workload and window [start, end): accepted count, last acceptedAt, known send failures (by their report window start), intake rejections (at their time) and healthy | degraded | unknown; exact for any start and positive width, at most 10000 windows; no coverage percentage (SPEC R-OB-5). Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION intake.accepted_health_windows(timestamp with time zone, timestamp with time zone, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.accepted_health_windows(timestamp with time zone, timestamp with time zone, interval) TO outbox_auditor;
