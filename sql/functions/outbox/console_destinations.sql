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
