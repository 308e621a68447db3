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
CREATE OR REPLACE FUNCTION outbox.console_activity(p_window interval, p_bucket interval)
 RETURNS TABLE(destination text, bucket_start timestamp with time zone, finished bigint, acknowledged bigint, retried bigint, quarantined bigint, lease_expired bigint, max_ack_lag_seconds double precision)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION outbox.console_activity(interval, interval) IS
    'Operator console charts: per destination and time bucket of the last window, attempts finished, acknowledged, retried, quarantined, lease-expired, and the largest ack lag. O(finishes in the window). Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_activity(interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_activity(interval, interval) TO outbox_auditor;
