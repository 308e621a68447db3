-- outbox._ack_problem(p_delivery outbox.outbox_deliveries, p_event outbox.outbox_events,
--                     p_kind outbox.receipt_kinds, p_ack json, p_receipt json, p_candidate text) RETURNS text
-- (private, SPEC R-AK-1, R-AK-1a, R-AK-2, R-AK-9, D-2; the checks in order: docs/contract.md
--   "The ack rule")
-- Purpose: THE ack rule - NULL when an ActiveConsumerAck@1 and the receipt body it summarizes
--   match the FROZEN delivery (consumer, expected receipt type and schema version, projection
--   target - never the receipt's own claim), the destination's receipt kind p_kind and the event
--   (id, digest algorithm, sha), else the OB002 DETAIL naming the field. The receipt document
--   itself is judged by the closed-receipt rule shared with inbox.record_receipt
--   (outbox._receipt_problem); its digest on the hot path from p_candidate (D-2), else by the
--   database's canonicalizer - the hot path accepts exactly what the slow path accepts.
-- Never raises, changes nothing. ack_deliveries applies it to every item its batch predicate
--   rejects (ack_delivery is a batch of one), so the one-row and the batch path never disagree.
-- Caller: outbox._ack_item_problem (for outbox.ack_deliveries); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._ack_problem(p_delivery outbox.outbox_deliveries, p_event outbox.outbox_events, p_kind outbox.receipt_kinds, p_ack json, p_receipt json, p_candidate text)
 RETURNS text
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    c_ack_keys constant text[] := ARRAY['destination', 'consumerName', 'eventId',
                                        'eventEnvelopeDigestAlgorithmVersion', 'eventEnvelopeSha256',
                                        'appliedReceipt'];
    c_body_keys constant text[] := ARRAY['destination', 'consumerName', 'eventId',
                                         'eventEnvelopeDigestAlgorithmVersion', 'eventEnvelopeSha256'];
    v_kind      outbox.receipt_kinds := p_kind;
    v_dup_ack   boolean;
    v_dup_ar    boolean;
    v_dup_rc    boolean;
    v_ack       jsonb;
    v_ar        jsonb;
    v_rc        jsonb;
    v_p         text;
    v_key       text;
    v_quartet   text[];
    v_expected  jsonb;
    v_candidate json;
    v_digest    text;
BEGIN
  BEGIN
    -- ack document --------------------------------------------------------------------------
    IF p_ack IS NULL OR pg_catalog.json_typeof(p_ack) <> 'object' THEN
        RETURN ('ack must be a JSON object (ActiveConsumerAck@1)');
    END IF;
    v_ack := p_ack::jsonb;
    v_rc := CASE WHEN pg_catalog.json_typeof(p_receipt) = 'object' THEN p_receipt::jsonb END;
    -- duplicate keys (json keeps them, jsonb does not): one query for the three documents
    SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_ack))
               <> (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v_ack)),
           CASE WHEN pg_catalog.jsonb_typeof(v_ack->'appliedReceipt') = 'object'
                THEN (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_ack->'appliedReceipt'))
                         <> (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v_ack->'appliedReceipt'))
                ELSE false END,
           CASE WHEN v_rc IS NOT NULL
                THEN (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_receipt))
                         <> (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v_rc))
                ELSE false END
      INTO v_dup_ack, v_dup_ar, v_dup_rc;
    IF v_dup_ack THEN
        SELECT e.key INTO v_key FROM pg_catalog.json_each(p_ack) AS e
         GROUP BY e.key HAVING pg_catalog.count(*) > 1 ORDER BY e.key LIMIT 1;
        RETURN (pg_catalog.format('ack: duplicate key %s', v_key));
    END IF;
    IF v_ack - c_ack_keys <> '{}'::jsonb THEN
        SELECT k INTO v_key FROM pg_catalog.jsonb_object_keys(v_ack) AS k WHERE k <> ALL (c_ack_keys) ORDER BY k LIMIT 1;
        RETURN (pg_catalog.format('ack: unknown key %s', v_key));
    END IF;
    IF NOT v_ack ?& c_ack_keys THEN
        SELECT k INTO v_key FROM pg_catalog.unnest(c_ack_keys) AS k WHERE NOT v_ack ? k LIMIT 1;
        RETURN (pg_catalog.format('ack: missing key %s', v_key));
    END IF;

    IF v_ack->'destination' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.destination) THEN
        RETURN (pg_catalog.format('ack.destination %s is not the delivery''s destination %s',
                                                     v_ack->'destination', p_delivery.destination));
    END IF;
    IF v_ack->'consumerName' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.consumer_name) THEN
        RETURN (pg_catalog.format('ack.consumerName %s is not the frozen consumer %s',
                                                     v_ack->'consumerName', p_delivery.consumer_name));
    END IF;
    IF v_ack->'eventId' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.event_id::text) THEN
        RETURN (pg_catalog.format('ack.eventId %s is not the delivery''s event %s',
                                                     v_ack->'eventId', p_delivery.event_id));
    END IF;
    IF v_ack->'eventEnvelopeDigestAlgorithmVersion' IS DISTINCT FROM pg_catalog.to_jsonb(p_event.event_envelope_digest_algorithm_version) THEN
        RETURN (pg_catalog.format('ack.eventEnvelopeDigestAlgorithmVersion %s is not the event''s %s',
                                                     v_ack->'eventEnvelopeDigestAlgorithmVersion', p_event.event_envelope_digest_algorithm_version));
    END IF;
    IF v_ack->'eventEnvelopeSha256' IS DISTINCT FROM pg_catalog.to_jsonb(p_event.event_envelope_sha256) THEN
        RETURN (pg_catalog.format('ack.eventEnvelopeSha256 %s is not the event''s %s',
                                                     v_ack->'eventEnvelopeSha256', p_event.event_envelope_sha256));
    END IF;

    -- appliedReceipt (the receipt quartet) ---------------------------------------------------
    IF pg_catalog.json_typeof(p_ack->'appliedReceipt') IS DISTINCT FROM 'object' THEN
        RETURN ('ack.appliedReceipt must be a JSON object');
    END IF;
    IF v_dup_ar THEN
        SELECT e.key INTO v_key FROM pg_catalog.json_each(p_ack->'appliedReceipt') AS e
         GROUP BY e.key HAVING pg_catalog.count(*) > 1 ORDER BY e.key LIMIT 1;
        RETURN (pg_catalog.format('ack.appliedReceipt: duplicate key %s', v_key));
    END IF;
    v_ar := v_ack->'appliedReceipt';

    IF v_ar->'kind' IS DISTINCT FROM pg_catalog.to_jsonb(v_kind.receipt_kind) THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.kind %s is not the receipt kind %s of destination %s',
                                                     coalesce(v_ar->'kind', 'null'::jsonb), v_kind.receipt_kind, p_delivery.destination));
    END IF;
    IF v_kind.receipt_type IS DISTINCT FROM p_delivery.expected_receipt_type THEN
        RETURN (pg_catalog.format('receipt type %s of kind %s is not the frozen expected receipt type %s',
                                                     v_kind.receipt_type, v_kind.receipt_kind, p_delivery.expected_receipt_type));
    END IF;
    v_p := v_kind.field_prefix;
    v_quartet := ARRAY[v_p || 'Ref', v_p || 'SchemaVersion', v_p || 'DigestAlgorithmVersion', v_p || 'Digest'];

    IF v_ar - 'kind' - v_quartet <> '{}'::jsonb THEN
        SELECT k INTO v_key FROM pg_catalog.jsonb_object_keys(v_ar) AS k
         WHERE k <> 'kind' AND k <> ALL (v_quartet) ORDER BY k LIMIT 1;
        RETURN (pg_catalog.format('ack.appliedReceipt: unknown key %s', v_key));
    END IF;
    IF NOT v_ar ?& v_quartet THEN
        SELECT k INTO v_key FROM pg_catalog.unnest(v_quartet) AS k WHERE NOT v_ar ? k LIMIT 1;
        RETURN (pg_catalog.format('ack.appliedReceipt: missing receipt quartet field %s', v_key));
    END IF;
    IF pg_catalog.jsonb_typeof(v_ar->v_quartet[1]) IS DISTINCT FROM 'string' OR v_ar->>v_quartet[1] = ''
       OR pg_catalog.length(v_ar->>v_quartet[1]) > 500 THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.%s must be a non-empty string of at most 500 characters', v_quartet[1]));
    END IF;
    -- integer form (R-AK-1a): read from the json text, where 1.0 and 1e0 keep their spelling
    -- (jsonb would print 1e0 as 1)
    IF v_ar->v_quartet[2] IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.expected_receipt_schema_version)
       OR p_ack->'appliedReceipt'->>v_quartet[2] !~ '^[0-9]+$' THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.%s %s is not the frozen expected receipt schema version %s',
                                                     v_quartet[2], v_ar->v_quartet[2], p_delivery.expected_receipt_schema_version));
    END IF;
    IF v_ar->v_quartet[3] IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.%s %s is not jcs-sha256-v1', v_quartet[3], v_ar->v_quartet[3]));
    END IF;
    IF pg_catalog.jsonb_typeof(v_ar->v_quartet[4]) IS DISTINCT FROM 'string' OR v_ar->>v_quartet[4] !~ '^[0-9a-f]{64}$' THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.%s must be 64 lower-case hex digits', v_quartet[4]));
    END IF;

    -- receipt body (R-AK-1a) ------------------------------------------------------------------
    IF p_receipt IS NULL OR pg_catalog.json_typeof(p_receipt) <> 'object' THEN
        RETURN ('receipt must be a JSON object (the receipt body is always passed)');
    END IF;
    IF v_dup_rc THEN
        SELECT e.key INTO v_key FROM pg_catalog.json_each(p_receipt) AS e
         GROUP BY e.key HAVING pg_catalog.count(*) > 1 ORDER BY e.key LIMIT 1;
        RETURN (pg_catalog.format('receipt: duplicate key %s', v_key));
    END IF;

    FOREACH v_key IN ARRAY v_quartet LOOP
        IF NOT v_rc ? v_key THEN
            RETURN (pg_catalog.format('receipt: missing field %s', v_key));
        END IF;
        IF v_rc->v_key IS DISTINCT FROM v_ar->v_key THEN
            RETURN (pg_catalog.format('receipt.%s %s differs from ack.appliedReceipt.%s %s',
                                                         v_key, v_rc->v_key, v_key, v_ar->v_key));
        END IF;
    END LOOP;
    FOREACH v_key IN ARRAY c_body_keys LOOP
        IF NOT v_rc ? v_key THEN
            RETURN (pg_catalog.format('receipt: missing field %s', v_key));
        END IF;
        IF v_rc->v_key IS DISTINCT FROM v_ack->v_key THEN
            RETURN (pg_catalog.format('receipt.%s %s differs from ack.%s %s',
                                                         v_key, v_rc->v_key, v_key, v_ack->v_key));
        END IF;
    END LOOP;
    IF NOT v_rc ? v_kind.time_field THEN
        RETURN (pg_catalog.format('receipt: missing field %s', v_kind.time_field));
    END IF;
    IF pg_catalog.jsonb_typeof(v_rc->v_kind.time_field) IS DISTINCT FROM 'string'
       OR v_rc->>v_kind.time_field !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN
        RETURN (pg_catalog.format('receipt.%s must be UTC RFC 3339 with 6 fractional digits and Z', v_kind.time_field));
    END IF;
    PERFORM (v_rc->>v_kind.time_field)::timestamptz; -- an invalid time is answered by the handler below

    -- The projection target comes from the frozen delivery, never from the receipt (R-AK-2).
    IF p_delivery.required_projection_name IS NOT NULL THEN
        IF v_rc->'projectionName' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.required_projection_name) THEN
            RETURN (pg_catalog.format('receipt.projectionName %s is not the frozen projection target %s',
                                                         coalesce(v_rc->'projectionName', 'null'::jsonb), p_delivery.required_projection_name));
        END IF;
        IF v_rc->'projectionVersion' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.required_projection_version) THEN
            RETURN (pg_catalog.format('receipt.projectionVersion %s is not the frozen projection target version %s',
                                                         coalesce(v_rc->'projectionVersion', 'null'::jsonb), p_delivery.required_projection_version));
        END IF;
    END IF;
    IF v_rc ? 'eventType' AND v_rc->'eventType' IS DISTINCT FROM pg_catalog.to_jsonb(p_event.event_type) THEN
        RETURN (pg_catalog.format('receipt.eventType %s is not the event''s type %s', v_rc->'eventType', p_event.event_type));
    END IF;
    IF v_rc ? 'eventSchemaVersion' AND v_rc->'eventSchemaVersion' IS DISTINCT FROM pg_catalog.to_jsonb(p_event.schema_version) THEN
        RETURN (pg_catalog.format('receipt.eventSchemaVersion %s is not the event''s schema version %s',
                                                     v_rc->'eventSchemaVersion', p_event.schema_version));
    END IF;
    -- the closed-receipt rule (R-AK-1a), the same for the producer and the inbox
    v_key := outbox._receipt_problem(v_kind, p_receipt, v_rc);
    IF v_key IS NOT NULL THEN
        RETURN 'receipt: ' || v_key;
    END IF;

    -- receipt digest (D-2): jcs-sha256-v1 of the body minus <P>Ref, <P>Digest and the time field.
    -- Hot path: the caller's canonical candidate, proven canonical and equal to that part of the
    -- receipt; otherwise (no candidate, or one that is not exactly that) the slow path.
    IF p_candidate IS NOT NULL AND outbox._jcs_text_problem(p_candidate) IS NULL THEN
        IF p_candidate::jsonb = v_rc - v_quartet[1] - v_quartet[4] - v_kind.time_field THEN
            v_digest := outbox._sha256_hex(p_candidate);
        END IF;
    END IF;
    IF v_digest IS NULL THEN
        SELECT pg_catalog.json_object_agg(e.key, e.value) INTO v_candidate
          FROM pg_catalog.json_each(p_receipt) AS e
         WHERE e.key <> ALL (ARRAY[v_quartet[1], v_quartet[4], v_kind.time_field]);
        BEGIN
            v_digest := outbox.jcs_sha256(v_candidate);
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            RETURN (pg_catalog.format('receipt is not canonicalizable under jcs-sha256-v1: %s', SQLERRM));
        END;
    END IF;
    IF v_digest IS DISTINCT FROM v_ar->>v_quartet[4] THEN
        RETURN (pg_catalog.format('receipt digest %s (recomputed, jcs-sha256-v1) differs from %s %s',
                                                     v_digest, v_quartet[4], v_ar->>v_quartet[4]));
    END IF;

    RETURN NULL;
  EXCEPTION
    WHEN invalid_datetime_format OR datetime_field_overflow THEN
        RETURN pg_catalog.format('receipt.%s is not a valid time', v_kind.time_field);
    WHEN untranslatable_character OR character_not_in_repertoire OR invalid_text_representation THEN
        RETURN pg_catalog.format('ack or receipt is not canonicalizable under jcs-sha256-v1: %s', SQLERRM);
  END;
END
$function$;

COMMENT ON FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text) IS
    'Private: the ack rule - NULL when an ActiveConsumerAck@1 and its receipt body match the frozen delivery, destination receipt kind and event, else the OB002 detail (SPEC R-AK-1, R-AK-1a, R-AK-2, D-2).';

REVOKE ALL ON FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text) FROM PUBLIC;
