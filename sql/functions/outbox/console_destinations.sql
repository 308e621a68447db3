CREATE OR REPLACE FUNCTION outbox.console_destinations()
 RETURNS TABLE(destination text, consumer_name text, pending_count bigint, leased_count bigint, oldest_pending_at timestamp with time zone, quarantined_open bigint, open_gaps bigint, oldest_gap_at timestamp with time zone, paused_reason text, paused_at timestamp with time zone, paused_by text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY
    WITH v_work AS (
        SELECT d.destination AS v_destination,
               pg_catalog.count(*) FILTER (WHERE d.status = 'pending') AS v_pending,
               pg_catalog.count(*) FILTER (WHERE d.status = 'leased')  AS v_leased,
               pg_catalog.min(d.created_at)                            AS v_oldest,
               pg_catalog.count(*) FILTER (WHERE d.last_error_code = 'awaiting_revision') AS v_gaps,
               pg_catalog.min(d.created_at) FILTER (WHERE d.last_error_code = 'awaiting_revision') AS v_oldest_gap
        FROM outbox.outbox_deliveries AS d
        WHERE d.status IN ('pending', 'leased')
        GROUP BY d.destination
    ), v_quarantine AS (
        SELECT q.destination AS v_destination, pg_catalog.count(*) AS v_open
        FROM outbox.outbox_quarantine AS q
        WHERE q.acknowledged_at IS NULL
        GROUP BY q.destination
    )
    SELECT dd.destination,
           dd.consumer_name,
           COALESCE(w.v_pending, 0)::bigint,
           COALESCE(w.v_leased, 0)::bigint,
           w.v_oldest,
           COALESCE(qq.v_open, 0)::bigint,
           COALESCE(w.v_gaps, 0)::bigint,
           w.v_oldest_gap,
           p.reason,
           p.paused_at,
           p.paused_by
    FROM outbox.delivery_destinations AS dd
    LEFT JOIN v_work AS w ON w.v_destination = dd.destination
    LEFT JOIN v_quarantine AS qq ON qq.v_destination = dd.destination
    LEFT JOIN outbox.destination_claim_pauses AS p ON p.destination = dd.destination
    ORDER BY dd.destination;
END
$function$;

COMMENT ON FUNCTION outbox.console_destinations() IS
    'Operator console overview: per destination backlog, oldest undelivered, open quarantine, open revision gaps and the claim pause, O(backlog). Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_destinations() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_destinations() TO outbox_auditor;
