-- outbox._lock_deliveries(p_destinations text[], p_event_ids uuid[]) RETURNS void
-- (private, SPEC R-CL-3, R-AK-9)
-- Purpose: the one row-locking step of the batch outcome functions: lock the named deliveries
--   (parallel arrays; unknown ones are simply absent) FOR UPDATE in (destination, event_id)
--   order, so concurrent batches cannot deadlock on each other. The caller judges the items in a
--   later statement, which then sees the committed state of the locked rows.
-- Caller: ack_deliveries, retry_deliveries, quarantine_deliveries; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._lock_deliveries(p_destinations text[], p_event_ids uuid[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM 1
       FROM outbox.outbox_deliveries AS d
      WHERE (d.destination, d.event_id) IN (SELECT u.dest, u.ev FROM unnest(p_destinations, p_event_ids) AS u(dest, ev))
      ORDER BY d.destination, d.event_id
        FOR UPDATE OF d;
END
$function$;

COMMENT ON FUNCTION outbox._lock_deliveries(text[], uuid[]) IS
    'Private: lock the named deliveries FOR UPDATE in key order (SPEC R-AK-9).';

REVOKE ALL ON FUNCTION outbox._lock_deliveries(text[], uuid[]) FROM PUBLIC;
