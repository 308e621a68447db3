-- outbox.ack_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-1..4, R-AK-9, D-2, §13)
-- Purpose: record many ActiveConsumerAck@1 outcomes in one call and one transaction. p_items is a
--   JSON array (at most 1000) of {destination, eventId, attemptId, leaseToken, ack, receipt,
--   receiptDigestCandidate?}; receiptDigestCandidate is the canonical text of the receipt minus
--   <prefix>Ref, <prefix>Digest and its time field (D-2 receipt hot path). One row comes back
--   per item, in input order: outcome 'complete' (the event is published, now or before),
--   'not_complete' (acknowledged; another mandatory delivery of the event is open) or
--   'rejected' with sqlstate and detail: 22023 (item shape), OB001 (fencing; also a delivery
--   named twice in one batch: the second is refused), OB002 (the ack rule, outbox._ack_problem).
--   A rejected item changes nothing and never stops the others.
-- Set-based: one statement locks the named deliveries (FOR UPDATE, in destination/event order),
--   one judges every item (fence rule outbox._fence_problem, then the ack rule), one appends the
--   success finishes and sets the deliveries acknowledged with the ack columns, then the
--   publication function runs once for the set of events (once per event even when several of
--   its deliveries are in the batch).
-- Time: now = clock_timestamp() captured once per call (live-lease test, finish time,
--   delivered_at, published_at).
-- SQLSTATEs (whole call): 22023 when p_items is not a JSON array or has more than 1000 items;
--   OB002 when publication finds an acknowledged delivery inconsistent with its event
--   (tampering). Item-level codes come back as rows.
-- Caller: outbox_dispatcher (also through outbox.ack_delivery, a batch of one).
CREATE FUNCTION outbox.ack_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_ord       integer[];
    v_dest      text[];
    v_event     uuid[];
    v_attempt   uuid[];
    v_token     uuid[];
    v_ack       json[];
    v_receipt   json[];
    v_cand      text[];
    v_state     text[];
    v_detail    text[];
    v_events    uuid[];
    v_acked_dest  text[];
    v_acked_event uuid[];
    v_published uuid[];
BEGIN
    SELECT pg_catalog.array_agg(b.ord ORDER BY b.ord), pg_catalog.array_agg(b.destination ORDER BY b.ord),
           pg_catalog.array_agg(b.event_id ORDER BY b.ord), pg_catalog.array_agg(b.attempt_id ORDER BY b.ord),
           pg_catalog.array_agg(b.lease_token ORDER BY b.ord),
           pg_catalog.array_agg(b.item->'ack' ORDER BY b.ord), pg_catalog.array_agg(b.item->'receipt' ORDER BY b.ord),
           pg_catalog.array_agg(CASE WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'receiptDigestCandidate') = 'string'
                                     THEN b.item_jsonb->>'receiptDigestCandidate' END ORDER BY b.ord),
           pg_catalog.array_agg(CASE WHEN b.shape_problem IS NOT NULL THEN '22023'
                                     WHEN b.item_jsonb->'receiptDigestCandidate' IS NOT NULL
                                      AND pg_catalog.jsonb_typeof(b.item_jsonb->'receiptDigestCandidate') NOT IN ('string', 'null')
                                     THEN '22023' END ORDER BY b.ord),
           pg_catalog.array_agg(coalesce(b.shape_problem,
                                         CASE WHEN b.item_jsonb->'receiptDigestCandidate' IS NOT NULL
                                               AND pg_catalog.jsonb_typeof(b.item_jsonb->'receiptDigestCandidate') NOT IN ('string', 'null')
                                              THEN pg_catalog.format('item %s: receiptDigestCandidate must be a string', b.ord) END)
                                ORDER BY b.ord)
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_cand, v_state, v_detail
      FROM outbox._batch_items(p_items, 'ack_deliveries',
                               ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'ack', 'receipt', 'receiptDigestCandidate'],
                               ARRAY[]::text[]) AS b;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    -- 1. lock the named deliveries in a fixed order (concurrent batches cannot deadlock on them)
    PERFORM outbox._lock_deliveries(v_dest, v_event);

    -- 2. judge every item: shape, then fencing, then the ack rule (a fresh statement: it sees the
    --    committed state of the rows locked above)
    -- (a MATERIALIZED CTE: each rule runs exactly once per item; a flattened subquery would let
    -- the planner copy the rule's call into every expression that reads its result)
    WITH judged AS MATERIALIZED (
        SELECT u.ord, u.state, u.detail, f.problem AS fence_problem, a.problem AS ack_problem
          FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                  FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_cand, v_state, v_detail)
                       AS x(ord, dest, ev, att, tok, ack, rc, cand, state, detail)) AS u
          LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
          LEFT JOIN outbox.outbox_events AS e ON e.event_id = u.ev
          LEFT JOIN outbox.delivery_destinations AS dd ON dd.destination = u.dest
          LEFT JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         CROSS JOIN LATERAL (
                SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                            WHEN u.rn > 1
                            THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                            ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
              ) AS f
         CROSS JOIN LATERAL (
                SELECT CASE WHEN u.state IS NULL AND f.problem IS NULL
                            THEN outbox._ack_problem(d, e, rk, u.ack, u.rc, u.cand) END AS problem
              ) AS a
    )
    SELECT pg_catalog.array_agg(CASE WHEN j.state IS NOT NULL THEN j.state
                                     WHEN j.fence_problem IS NOT NULL THEN 'OB001'
                                     WHEN j.ack_problem IS NOT NULL THEN 'OB002' END ORDER BY j.ord),
           pg_catalog.array_agg(coalesce(j.detail, j.fence_problem, j.ack_problem) ORDER BY j.ord)
      INTO v_state, v_detail
      FROM judged AS j;

    -- 3. the accepted items: success finish (keeping the receipt body for the audit sweep
    --    outbox.verify_ack_digests), acknowledged with the ack columns (R-AK-3)
    WITH ok AS (
        SELECT u.dest, u.ev, u.att, u.tok, u.ack::jsonb AS ack, u.rc
          FROM unnest(v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_state) AS u(dest, ev, att, tok, ack, rc, state)
         WHERE u.state IS NULL
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref, receipt)
        SELECT ok.att, v_now, 'acknowledged', 'none', NULL, NULL, ok.rc FROM ok
        RETURNING attempt_id
    ), acked AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status                                      = 'acknowledged',
               delivered_at                                = v_now,
               lease_owner                                 = NULL,
               lease_token                                 = NULL,
               lease_expires_at                            = NULL,
               ack_consumer_name                           = ok.ack->>'consumerName',
               ack_receipt_kind                            = rk.receipt_kind,
               ack_receipt_type                            = rk.receipt_type,
               ack_receipt_ref                             = ok.ack->'appliedReceipt'->>(rk.field_prefix || 'Ref'),
               ack_receipt_schema_version                  = (ok.ack->'appliedReceipt'->>(rk.field_prefix || 'SchemaVersion'))::integer,
               ack_receipt_digest_algorithm_version        = ok.ack->'appliedReceipt'->>(rk.field_prefix || 'DigestAlgorithmVersion'),
               ack_receipt_digest                          = ok.ack->'appliedReceipt'->>(rk.field_prefix || 'Digest'),
               ack_event_envelope_digest_algorithm_version = ok.ack->>'eventEnvelopeDigestAlgorithmVersion',
               ack_event_envelope_sha256                   = ok.ack->>'eventEnvelopeSha256'
          FROM ok
          JOIN outbox.delivery_destinations AS dd ON dd.destination = ok.dest
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         WHERE d.destination = ok.dest AND d.event_id = ok.ev
           AND d.status = 'leased' AND d.current_attempt_id = ok.att AND d.lease_token = ok.tok
        RETURNING d.event_id, d.destination
    )
    SELECT pg_catalog.array_agg(DISTINCT acked.event_id), pg_catalog.array_agg(acked.destination),
           pg_catalog.array_agg(acked.event_id)
      INTO v_events, v_acked_dest, v_acked_event
      FROM acked;

    -- 3b. an acknowledged head no longer holds its aggregate's chain (R-CL-6, R-CL-7)
    PERFORM outbox._release_successors(v_acked_dest, v_acked_event, v_now);

    -- 4. publication, once per event (R-AK-4)
    v_published := outbox._publish_events(v_events, v_now);

    RETURN QUERY
    SELECT u.dest, u.ev, u.att,
           CASE WHEN u.state IS NOT NULL THEN 'rejected'
                WHEN u.ev = ANY (v_published) THEN 'complete'
                ELSE 'not_complete' END,
           u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_state, v_detail) AS u(ord, dest, ev, att, state, detail)
     ORDER BY u.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.ack_deliveries(json) IS
    'Record many ActiveConsumerAck@1 outcomes in one transaction, each fenced and validated by the same rule as ack_delivery; one row per item in input order: complete | not_complete | rejected (sqlstate, detail). Publication once per completed event. SPEC R-AK-9, D-2.';
REVOKE ALL ON FUNCTION outbox.ack_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_deliveries(json) TO outbox_dispatcher;
