-- outbox._dispatch_fence(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                        p_now timestamptz) RETURNS outbox.outbox_deliveries  (private, SPEC R-CL-3)
-- Purpose: the one fencing check shared by renew_lease, ack_delivery, retry_delivery and
--   quarantine_delivery. Locks the delivery row (FOR UPDATE, waiting: a concurrent recovery or
--   claim of the same row finishes first and we then see its committed state) and returns it
--   only when it is leased, its current attempt is p_attempt_id, its token is p_lease_token and
--   the lease is still live at p_now (lease_expires_at > p_now).
-- Time: p_now is the caller's clock_timestamp() captured once per call (not the transaction
--   start), so a caller holding a transaction open cannot stretch a lease.
-- SQLSTATEs: OB001 with a distinct DETAIL per cause (incomplete fence, unknown delivery, not
--   leased, stale attempt, wrong token, expired lease). Nothing is changed by this function.
-- Caller: the dispatch functions above (running as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._dispatch_fence(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                       p_lease_token uuid, p_now timestamptz)
RETURNS outbox.outbox_deliveries
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_d outbox.outbox_deliveries;
BEGIN
    IF p_destination IS NULL OR p_event_id IS NULL OR p_attempt_id IS NULL OR p_lease_token IS NULL THEN
        RAISE EXCEPTION 'fencing rejected: incomplete fence'
            USING ERRCODE = 'OB001',
                  DETAIL = 'destination, event_id, attempt_id and lease_token are all required';
    END IF;

    SELECT d.* INTO v_d
      FROM outbox.outbox_deliveries AS d
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencing rejected: no such delivery'
            USING ERRCODE = 'OB001',
                  DETAIL = pg_catalog.format('no delivery for destination %s and event %s', p_destination, p_event_id);
    END IF;
    IF v_d.status <> 'leased' THEN
        RAISE EXCEPTION 'fencing rejected: delivery is not leased'
            USING ERRCODE = 'OB001',
                  DETAIL = pg_catalog.format('delivery %s/%s is %s', p_destination, p_event_id, v_d.status);
    END IF;
    IF v_d.current_attempt_id IS DISTINCT FROM p_attempt_id THEN
        RAISE EXCEPTION 'fencing rejected: stale attempt'
            USING ERRCODE = 'OB001',
                  DETAIL = pg_catalog.format('attempt %s is not the current attempt of delivery %s/%s', p_attempt_id, p_destination, p_event_id);
    END IF;
    IF v_d.lease_token IS DISTINCT FROM p_lease_token THEN
        RAISE EXCEPTION 'fencing rejected: wrong lease token'
            USING ERRCODE = 'OB001',
                  DETAIL = pg_catalog.format('lease token does not match the current lease of delivery %s/%s', p_destination, p_event_id);
    END IF;
    IF v_d.lease_expires_at <= p_now THEN
        RAISE EXCEPTION 'fencing rejected: lease expired'
            USING ERRCODE = 'OB001',
                  DETAIL = pg_catalog.format('lease of delivery %s/%s expired at %s', p_destination, p_event_id, v_d.lease_expires_at);
    END IF;
    RETURN v_d;
END
$fn$;

COMMENT ON FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamptz) IS
    'Private: lock a delivery and check destination+event+current attempt+token+live lease, else OB001 (SPEC R-CL-3).';
REVOKE ALL ON FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamptz) FROM PUBLIC;
