-- outbox._dispatch_fence(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                        p_now timestamptz) RETURNS outbox.outbox_deliveries  (private, SPEC R-CL-3)
-- Purpose: the fencing check of renew_lease (the outcome functions apply the same rule,
--   outbox._fence_problem, to every item of a batch). Locks the delivery row (FOR UPDATE, waiting: a concurrent recovery or
--   claim of the same row finishes first and we then see its committed state) and returns it
--   only when it is leased, its current attempt is p_attempt_id, its token is p_lease_token and
--   the lease is still live at p_now (lease_expires_at > p_now).
-- Time: p_now is the caller's clock_timestamp() captured once per call (not the transaction
--   start), so a caller holding a transaction open cannot stretch a lease.
-- SQLSTATEs: OB001 with a distinct DETAIL per cause (incomplete fence, unknown delivery, not
--   leased, stale attempt, wrong token, expired lease). Nothing is changed by this function.
-- Caller: the dispatch functions above (running as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._dispatch_fence(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid, p_now timestamp with time zone)
 RETURNS outbox.outbox_deliveries
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_d       outbox.outbox_deliveries;
    v_problem text;
BEGIN
    SELECT d.* INTO v_d
      FROM outbox.outbox_deliveries AS d
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       FOR UPDATE;
    v_problem := outbox._fence_problem(v_d, p_destination, p_event_id, p_attempt_id, p_lease_token, p_now);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'fencing rejected' USING ERRCODE = 'OB001', DETAIL = v_problem;
    END IF;
    RETURN v_d;
END
$function$;

COMMENT ON FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamp with time zone) IS
    'Private: lock a delivery and check destination+event+current attempt+token+live lease, else OB001 (SPEC R-CL-3).';

REVOKE ALL ON FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamp with time zone) FROM PUBLIC;
