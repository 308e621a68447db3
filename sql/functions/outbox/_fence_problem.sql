-- outbox._fence_problem(p_delivery outbox.outbox_deliveries, p_destination text, p_event_id uuid,
--                       p_attempt_id uuid, p_lease_token uuid, p_now timestamptz) RETURNS text
-- (private, SPEC R-CL-3)
-- Purpose: THE fencing rule of every outcome (ack, retry, quarantine, renew; one row or a batch):
--   NULL when p_delivery (the row of destination/event, locked by the caller; NULL when there is
--   none) is leased to p_attempt_id with p_lease_token and the lease is live at p_now; else the
--   cause as a DETAIL for OB001: incomplete fence, unknown delivery, not leased, stale attempt,
--   wrong token, expired lease.
-- Time: p_now is the caller's clock_timestamp() captured once per call.
-- Caller: the dispatch functions (running as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._fence_problem(p_delivery outbox.outbox_deliveries, p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid, p_now timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT CASE
        WHEN p_destination IS NULL OR p_event_id IS NULL OR p_attempt_id IS NULL OR p_lease_token IS NULL
            THEN 'incomplete fence: destination, event_id, attempt_id and lease_token are all required'
        WHEN p_delivery.destination IS NULL
            THEN pg_catalog.format('no delivery for destination %s and event %s', p_destination, p_event_id)
        WHEN p_delivery.status <> 'leased'
            THEN pg_catalog.format('delivery %s/%s is %s', p_destination, p_event_id, p_delivery.status)
        WHEN p_delivery.current_attempt_id IS DISTINCT FROM p_attempt_id
            THEN pg_catalog.format('attempt %s is not the current attempt of delivery %s/%s', p_attempt_id, p_destination, p_event_id)
        WHEN p_delivery.lease_token IS DISTINCT FROM p_lease_token
            THEN pg_catalog.format('lease token does not match the current lease of delivery %s/%s', p_destination, p_event_id)
        WHEN p_delivery.lease_expires_at <= p_now
            THEN pg_catalog.format('lease of delivery %s/%s expired at %s', p_destination, p_event_id, p_delivery.lease_expires_at)
    END
$function$;

COMMENT ON FUNCTION outbox._fence_problem(outbox.outbox_deliveries, text, uuid, uuid, uuid, timestamp with time zone) IS
    'Private: NULL when destination+event+current attempt+token+live lease hold, else the OB001 cause (SPEC R-CL-3).';

REVOKE ALL ON FUNCTION outbox._fence_problem(outbox.outbox_deliveries, text, uuid, uuid, uuid, timestamp with time zone) FROM PUBLIC;
