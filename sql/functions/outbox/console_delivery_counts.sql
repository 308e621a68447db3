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
CREATE OR REPLACE FUNCTION outbox.console_delivery_counts(p_destination text, p_cap integer)
 RETURNS TABLE(status text, deliveries bigint, capped boolean)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION outbox.console_delivery_counts(text, integer) IS
    'Operator console: deliveries of one destination per state, each count capped at p_cap (capped = true means "at least"), so it stays bounded at any history size. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_delivery_counts(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_delivery_counts(text, integer) TO outbox_auditor;
