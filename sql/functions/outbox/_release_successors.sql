-- outbox._release_successors(p_destinations text[], p_event_ids uuid[], p_now timestamptz)
-- RETURNS integer  (private, SPEC R-CL-6, R-CL-7, R-SEC-5)
-- Purpose: per-aggregate ordering keeps a claim O(batch) (R-CL-6) by parking a delivery that
--   waits for an earlier revision at available_at = 'infinity' (append_events does it when an
--   earlier revision of the same aggregate is open for that destination), outside the claim's
--   index range. When deliveries become terminal (acknowledged, quarantined) this releases,
--   for each of their (destination, aggregate) pairs of a per_aggregate destination, the new
--   head of the chain - the lowest open revision - when it is parked: available_at = p_now.
--   One statement; an index probe per pair (outbox_deliveries_open). Ordering itself is still
--   enforced by the claim's NOT EXISTS check (R-CL-7): parking only keeps blocked rows out of
--   the scan, releasing too early could never break the order, and a parked row always has an
--   open earlier revision whose terminal transition releases it (append_events holds that row
--   FOR SHARE while it parks a new revision behind it).
-- Callers: outbox.ack_deliveries, outbox._quarantine_write (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._release_successors(p_destinations text[], p_event_ids uuid[], p_now timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_count integer;
BEGIN
    IF p_destinations IS NULL
       OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd
                       WHERE dd.destination = ANY (p_destinations) AND dd.ordering = 'per_aggregate') THEN
        RETURN 0;
    END IF;
    WITH done AS (
        SELECT DISTINCT d.destination, d.aggregate_id
          FROM unnest(p_destinations, p_event_ids) AS u(destination, event_id)
          JOIN outbox.delivery_destinations AS dd ON dd.destination = u.destination AND dd.ordering = 'per_aggregate'
          JOIN outbox.outbox_deliveries AS d ON d.destination = u.destination AND d.event_id = u.event_id
    ), heads AS (
        SELECT h.destination, h.event_id
          FROM done
         CROSS JOIN LATERAL (
                SELECT o.destination, o.event_id, o.status
                  FROM outbox.outbox_deliveries AS o
                 WHERE o.destination = done.destination AND o.aggregate_id = done.aggregate_id
                   AND o.status IN ('pending', 'leased')
                 ORDER BY o.aggregate_revision
                 LIMIT 1
              ) AS h
         WHERE h.status = 'pending'
    )
    UPDATE outbox.outbox_deliveries AS d
       SET available_at = p_now
      FROM heads
     WHERE d.destination = heads.destination AND d.event_id = heads.event_id
       AND d.status = 'pending' AND d.available_at = 'infinity';
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$function$;

COMMENT ON FUNCTION outbox._release_successors(text[], uuid[], timestamp with time zone) IS
    'Private: after deliveries became terminal, make the parked (available_at = infinity) head of each of their per_aggregate chains claimable (SPEC R-CL-6, R-CL-7).';

REVOKE ALL ON FUNCTION outbox._release_successors(text[], uuid[], timestamp with time zone) FROM PUBLIC;
