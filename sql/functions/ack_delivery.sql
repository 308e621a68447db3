-- outbox.ack_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                     p_ack json, p_receipt json) RETURNS text  (public, SPEC R-AK-1..4, §13)
-- Purpose: record a consumer's ActiveConsumerAck@1 (p_ack) and the receipt body it summarizes
--   (p_receipt, always passed: R-AK-1a). In one transaction (R-AK-3): lock + fence the delivery,
--   validate ack and receipt against the frozen delivery/member, the destination's receipt kind
--   and the event (outbox._ack_validate), append the success finish of the current attempt,
--   set status acknowledged with delivered_at and the ack_* columns and the lease cleared, then
--   call the publication function outbox._publish_event and return its result:
--   'complete' (published_at set now or earlier) or 'not_complete' (other mandatory deliveries
--   of the event are still open; this ack commits).
-- Locking/fencing: the delivery row is locked FOR UPDATE by outbox._dispatch_fence and must be
--   leased by p_attempt_id/p_lease_token with a live lease (OB001 otherwise); then the event row
--   is locked by the publication function (order: delivery, then event). At most one finish per
--   attempt start is also enforced by the finishes' primary key.
-- Time: now = clock_timestamp() captured once per call (finish time, delivered_at, live-lease test).
-- SQLSTATEs: OB001 fencing rejected; OB002 ack rejected (DETAIL names the field) or publication
--   invalid. On any error nothing changes: the delivery stays leased and will be retried or
--   recovered.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.ack_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                    p_lease_token uuid, p_ack json, p_receipt json)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_now  timestamptz := pg_catalog.clock_timestamp();
    v_d    outbox.outbox_deliveries;
    v_e    outbox.outbox_events;
    v_kind outbox.receipt_kinds;
    v_ack  jsonb;
    v_ar   jsonb;
    v_p    text;
BEGIN
    v_d := outbox._dispatch_fence(p_destination, p_event_id, p_attempt_id, p_lease_token, v_now);

    SELECT e.* INTO v_e FROM outbox.outbox_events AS e WHERE e.event_id = p_event_id;
    v_kind := outbox._ack_validate(v_d, v_e, p_ack, p_receipt);
    v_ack := p_ack::jsonb;
    v_ar := v_ack->'appliedReceipt';
    v_p := v_kind.field_prefix;

    INSERT INTO outbox.outbox_delivery_attempt_finishes
           (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
    VALUES (p_attempt_id, v_now, 'acknowledged', 'none', NULL, NULL);

    UPDATE outbox.outbox_deliveries AS d
       SET status                                      = 'acknowledged',
           delivered_at                                = v_now,
           lease_owner                                 = NULL,
           lease_token                                 = NULL,
           lease_expires_at                            = NULL,
           ack_consumer_name                           = v_ack->>'consumerName',
           ack_receipt_kind                            = v_kind.receipt_kind,
           ack_receipt_type                            = v_kind.receipt_type,
           ack_receipt_ref                             = v_ar->>(v_p || 'Ref'),
           ack_receipt_schema_version                  = (v_ar->>(v_p || 'SchemaVersion'))::integer,
           ack_receipt_digest_algorithm_version        = v_ar->>(v_p || 'DigestAlgorithmVersion'),
           ack_receipt_digest                          = v_ar->>(v_p || 'Digest'),
           ack_event_envelope_digest_algorithm_version = v_ack->>'eventEnvelopeDigestAlgorithmVersion',
           ack_event_envelope_sha256                   = v_ack->>'eventEnvelopeSha256'
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       AND d.status = 'leased' AND d.current_attempt_id = p_attempt_id AND d.lease_token = p_lease_token;
    IF NOT FOUND THEN -- unreachable while the fence's row lock is held; kept as the CAS guard
        RAISE EXCEPTION 'fencing rejected: lease changed concurrently'
            USING ERRCODE = 'OB001', DETAIL = pg_catalog.format('delivery %s/%s', p_destination, p_event_id);
    END IF;

    RETURN outbox._publish_event(p_event_id);
END
$fn$;

COMMENT ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json) IS
    'Accept an ActiveConsumerAck@1 with its receipt body for a fenced live lease: success finish, acknowledged + ack fields, publication CAS in one transaction; returns complete | not_complete. OB001 fencing, OB002 ack mismatch. SPEC R-AK-1..4.';
REVOKE ALL ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json) TO outbox_dispatcher;
