-- outbox.ack_deliveries(p_items json) and its typed form (HP-2) outbox.ack_deliveries(destinations
--   text[], event_ids uuid[], attempt_ids uuid[], lease_tokens uuid[], acks json[], receipts json[],
--   receipt_digest_candidates text[]): the items as parallel arrays, element i = item i
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-1..4, R-AK-9, D-2, §12a HP-1..HP-4, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many ActiveConsumerAck@1 outcomes in one call and one transaction. JSON: an array (at
--   most 1000) of {destination, eventId, attemptId, leaseToken, ack, receipt, receiptDigestCandidate?}.
--   Both forms parse once (outbox._outcome_items) and run the rule once (outbox._ack_outcomes).
--   One row per item, in input order: complete | not_complete | rejected with sqlstate and
--   detail: 22023 (item shape), OB001 (fencing; a delivery named twice), OB002 (the ack rule). A
--   rejected item changes nothing.
-- SQLSTATEs (whole call): 22023 not a JSON array, arrays of different lengths, more than 1000
--   items; OB201 unreadable (\u0000); OB002 publication finds an acknowledged delivery
--   inconsistent with its event.
-- Caller: outbox_dispatcher (also through outbox.ack_delivery, a batch of one).
CREATE OR REPLACE FUNCTION outbox.ack_deliveries(p_items json)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the JSON form: parse once (outbox._outcome_items), then the rule (outbox._ack_outcomes)
    RETURN QUERY SELECT * FROM outbox._ack_outcomes(outbox._outcome_items(p_items, 'ack_deliveries'));
END
$function$;

COMMENT ON FUNCTION outbox.ack_deliveries(json) IS
    'Record many ActiveConsumerAck@1 outcomes in one transaction, each fenced and validated by the same rule as ack_delivery (one predicate per batch, the full rule only for rejected items); one row per item in input order: complete | not_complete | rejected (sqlstate, detail). Publication once per completed event. SPEC R-AK-9, D-2, HP-1.';

REVOKE ALL ON FUNCTION outbox.ack_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_deliveries(json) TO outbox_dispatcher;

CREATE OR REPLACE FUNCTION outbox.ack_deliveries(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[], p_lease_tokens uuid[], p_acks json[], p_receipts json[], p_receipt_digest_candidates text[])
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the typed form (HP-2): parallel arrays as internal/pgcall sends them, no JSON document to
    -- parse; the same checks per item (outbox._outcome_items) and the same rule
    RETURN QUERY SELECT * FROM outbox._ack_outcomes(outbox._outcome_items('ack_deliveries', p_destinations, p_event_ids,
                                                                        p_attempt_ids, p_lease_tokens, p_acks, p_receipts, p_receipt_digest_candidates, NULL, NULL, NULL));
END
$function$;

COMMENT ON FUNCTION outbox.ack_deliveries(text[], uuid[], uuid[], uuid[], json[], json[], text[]) IS
    'The typed form of ack_deliveries(json) (HP-2): the items as parallel arrays (element i of each = item i), the same checks, rule and result rows. 22023 when the arrays differ in length or hold more than 1000 items. SPEC R-AK-9, HP-2.';

REVOKE ALL ON FUNCTION outbox.ack_deliveries(text[], uuid[], uuid[], uuid[], json[], json[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_deliveries(text[], uuid[], uuid[], uuid[], json[], json[], text[]) TO outbox_dispatcher;
