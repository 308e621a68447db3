-- outbox.ack_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                     p_ack json, p_receipt json, p_receipt_digest_candidate text DEFAULT NULL)
--   RETURNS text  (public, SPEC R-AK-1..4, R-AK-9, D-2, §13)
-- Purpose: record one consumer's ActiveConsumerAck@1 (p_ack) and the receipt body it summarizes
--   (p_receipt, always passed: R-AK-1a); p_receipt_digest_candidate is the optional D-2 hot-path
--   argument (canonical text of the receipt minus <prefix>Ref, <prefix>Digest and its time).
--   A batch of one of outbox.ack_deliveries - the same fencing rule, ack rule, writes and
--   publication, in one transaction (R-AK-3) - returning 'complete' (the event is published, now
--   or before) or 'not_complete' (other mandatory deliveries of the event are still open).
-- Locking/fencing, time: see outbox.ack_deliveries.
-- SQLSTATEs: OB001 fencing rejected (DETAIL names the cause); OB002 ack rejected (DETAIL names
--   the field) or publication invalid. On any error nothing changes: the delivery stays leased
--   and will be retried or recovered.
-- Caller: outbox_dispatcher.
CREATE OR REPLACE FUNCTION outbox.ack_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid, p_ack json, p_receipt json, p_receipt_digest_candidate text DEFAULT NULL::text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_r record;
BEGIN
    SELECT r.outcome, r.sqlstate, r.detail INTO v_r
      FROM outbox.ack_deliveries(pg_catalog.json_build_array(pg_catalog.json_build_object(
               'destination', p_destination, 'eventId', p_event_id, 'attemptId', p_attempt_id,
               'leaseToken', p_lease_token, 'ack', p_ack, 'receipt', p_receipt,
               'receiptDigestCandidate', p_receipt_digest_candidate))) AS r;
    PERFORM outbox._raise_item('ack_delivery', v_r.sqlstate, v_r.detail);
    RETURN v_r.outcome;
END
$function$;

COMMENT ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json, text) IS
    'Accept an ActiveConsumerAck@1 with its receipt body (and optionally its D-2 digest candidate) for a fenced live lease: a batch of one of ack_deliveries; returns complete | not_complete. OB001 fencing, OB002 ack mismatch. SPEC R-AK-1..4, R-AK-9.';

REVOKE ALL ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json, text) TO outbox_dispatcher;
