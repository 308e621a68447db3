-- outbox._ack_item_problem(p_rn bigint, p_destination text, p_event_id uuid, p_attempt_id uuid,
--                          p_lease_token uuid, p_ack json, p_receipt json, p_candidate text,
--                          p_now timestamptz) RETURNS text[]
-- (private, SPEC R-CL-3, R-AK-2, R-AK-9, HP-1)
-- Purpose: the full rule for ONE ack item, in the order the one-row function has always applied
--   it: a delivery named a second time in the batch (p_rn > 1), then fencing
--   (outbox._fence_problem), then the ack rule (outbox._ack_problem). Returns NULL when the item
--   is acceptable, else ARRAY[sqlstate, detail] (OB001 or OB002). Never raises, changes nothing.
--   outbox.ack_deliveries calls it only for the items its one-statement predicate rejected (to
--   produce the SQLSTATE and detail, or to accept a correct ack that is not in canonical form),
--   so an all-success batch never calls it (HP-1).
-- Reads the delivery in the caller's statement snapshot: the caller locked it FOR UPDATE in an
--   earlier statement, so that is its committed state.
-- Caller: outbox.ack_deliveries (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._ack_item_problem(p_rn bigint, p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid, p_ack json, p_receipt json, p_candidate text, p_now timestamp with time zone)
 RETURNS text[]
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    v_d       outbox.outbox_deliveries;
    v_e       outbox.outbox_events;
    v_k       outbox.receipt_kinds;
    v_problem text;
BEGIN
    IF p_rn > 1 THEN
        RETURN ARRAY['OB001', pg_catalog.format('delivery %s/%s appears more than once in this batch', p_destination, p_event_id)];
    END IF;
    SELECT d.* INTO v_d FROM outbox.outbox_deliveries AS d
     WHERE d.destination = p_destination AND d.event_id = p_event_id;
    v_problem := outbox._fence_problem(v_d, p_destination, p_event_id, p_attempt_id, p_lease_token, p_now);
    IF v_problem IS NOT NULL THEN
        RETURN ARRAY['OB001', v_problem];
    END IF;
    SELECT e.* INTO v_e FROM outbox.outbox_events AS e WHERE e.event_id = p_event_id;
    SELECT rk.* INTO v_k
      FROM outbox.delivery_destinations AS dd
      JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
     WHERE dd.destination = p_destination;
    v_problem := outbox._ack_problem(v_d, v_e, v_k, p_ack, p_receipt, p_candidate);
    IF v_problem IS NOT NULL THEN
        RETURN ARRAY['OB002', v_problem];
    END IF;
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION outbox._ack_item_problem(bigint, text, uuid, uuid, uuid, json, json, text, timestamp with time zone) IS
    'Private: the full rule for one ack item (duplicate in batch, fencing, ack rule) - NULL or ARRAY[sqlstate, detail]; run only for items the batch predicate rejected (SPEC R-AK-9, HP-1).';

REVOKE ALL ON FUNCTION outbox._ack_item_problem(bigint, text, uuid, uuid, uuid, json, json, text, timestamp with time zone) FROM PUBLIC;
