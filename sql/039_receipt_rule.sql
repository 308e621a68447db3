-- One receipt rule, one outcome-item parse, no reference kind named in kernel SQL (issue 23
-- items 1 and 4; SPEC R-AK-1a, R-AK-9, HP-1, HP-2):
--   * outbox._receipt_problem: the closed-receipt rule (members, types, required members,
--     integer form, schema version, digest algorithms), called by outbox._ack_problem (producer)
--     and inbox.record_receipt (inbox) alike. Integers: the stricter test of the two it replaces
--     (no fraction or exponent, |n| <= 2^53-1, not below the registered minimum).
--   * outbox.receipt_kinds.requires_projection (true for operations_projection) and
--     outbox.receipt_kind_members.minimum (0 for broker_publication.sequence) replace the kind
--     names the rule used to test; any registered kind can now have that behaviour.
--   * outbox.outcome_items + outbox._outcome_items: the one parse of an ack/retry/quarantine
--     batch (typed parallel arrays), used by ack_deliveries, retry_deliveries and
--     quarantine_deliveries; one call per batch (HP-1).
-- Two columns on two tiny registry tables (ACCESS EXCLUSIVE for a moment); function bodies
-- otherwise: no hot table is touched, nothing to stop. Details: docs/migrations.md.
SET LOCAL ROLE outbox_owner;

ALTER TABLE outbox.receipt_kinds ADD COLUMN requires_projection boolean NOT NULL DEFAULT false;
ALTER TABLE outbox.receipt_kind_members ADD COLUMN minimum bigint,
    ADD CONSTRAINT receipt_kind_members_minimum_integer CHECK (minimum IS NULL OR json_type = 'integer');
COMMENT ON COLUMN outbox.receipt_kinds.requires_projection IS
    'Receipts of this kind name a projection: inbox.record_receipt refuses one recorded without projection (OB002). SPEC R-AK-1a.';
COMMENT ON COLUMN outbox.receipt_kind_members.minimum IS
    'Smallest value of an integer member (NULL: none besides |n| <= 2^53-1). SPEC R-AK-1a.';
-- the registry is immutable (tg_registry__immutable): the two attributes of existing rows are
-- set with its triggers off, inside this transaction
ALTER TABLE outbox.receipt_kinds DISABLE TRIGGER tg_receipt_kinds__immutable;
UPDATE outbox.receipt_kinds SET requires_projection = true WHERE receipt_kind = 'operations_projection';
ALTER TABLE outbox.receipt_kinds ENABLE TRIGGER tg_receipt_kinds__immutable;
ALTER TABLE outbox.receipt_kind_members DISABLE TRIGGER tg_receipt_kind_members__immutable;
UPDATE outbox.receipt_kind_members SET minimum = 0 WHERE receipt_kind = 'broker_publication' AND member = 'sequence';
ALTER TABLE outbox.receipt_kind_members ENABLE TRIGGER tg_receipt_kind_members__immutable;

-- the closed-receipt rule and its two callers
-- outbox._receipt_problem(p_kind outbox.receipt_kinds, p_receipt json, p_doc jsonb) RETURNS text
-- (private, SPEC R-AK-1a; the rule is written out in docs/contract.md "The closed-receipt rule")
-- Purpose: THE closed-receipt rule, shared by the producer (outbox._ack_problem, for ack_delivery
--   and ack_deliveries) and the inbox (inbox.record_receipt): NULL when the receipt document
--   p_receipt (p_doc: the same, parsed as jsonb) is a closed document of kind p_kind, else the
--   first problem, in this order: an unknown member or a registered member of the wrong JSON
--   type (first by name, "C" order); missing required members (<P>SchemaVersion and the kind's
--   required ones); an integer member (<P>SchemaVersion, the kind's integer members) not written
--   as a JSON integer without fraction or exponent, outside |n| <= 2^53-1 or below its
--   registered minimum; <P>SchemaVersion other than the kind's version; a digest algorithm
--   other than jcs-sha256-v1. Member names in the text are JSON-quoted.
-- One SQL expression (three subqueries on outbox.receipt_kind_members); never raises, changes
--   nothing. SQLSTATEs: none (each caller answers a problem with OB002).
-- Callers: outbox._ack_problem, inbox.record_receipt (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._receipt_problem(p_kind outbox.receipt_kinds, p_receipt json, p_doc jsonb)
RETURNS text
LANGUAGE sql
STABLE
-- search_path: not SET on purpose (a SET clause would stop inlining and cost a GUC save/restore);
-- it runs inside the pinned search_path of its SECURITY DEFINER callers; all is schema-qualified.
AS $fn$
    SELECT coalesce(
        -- 1. closed: every member common or registered for the kind, registered ones of their type
        (SELECT CASE WHEN m.member IS NULL
                     THEN pg_catalog.format('unknown member %s: %s receipts carry only the common members and those of outbox.receipt_kind_members',
                                            pg_catalog.to_json(e.key)::text, (p_kind).receipt_kind)
                     ELSE pg_catalog.format('member %s must be a JSON %s', pg_catalog.to_json(e.key)::text, m.json_type) END
           FROM pg_catalog.jsonb_each(p_doc) AS e
           LEFT JOIN outbox.receipt_kind_members AS m ON m.receipt_kind = (p_kind).receipt_kind AND m.member = e.key
          WHERE e.key <> ALL (ARRAY[(p_kind).field_prefix || 'Ref', (p_kind).field_prefix || 'SchemaVersion',
                                    (p_kind).field_prefix || 'DigestAlgorithmVersion', (p_kind).field_prefix || 'Digest',
                                    'destination', 'consumerName', 'eventId', 'eventEnvelopeDigestAlgorithmVersion',
                                    'eventEnvelopeSha256', (p_kind).time_field])
            AND (m.member IS NULL
                 OR pg_catalog.jsonb_typeof(e.value) <> CASE m.json_type WHEN 'integer' THEN 'number' ELSE m.json_type END)
          ORDER BY e.key COLLATE "C"
          LIMIT 1),
        -- 2. required members present
        (SELECT 'missing required member(s): ' || pg_catalog.string_agg(r.member, ', ' ORDER BY r.member COLLATE "C")
           FROM (SELECT (p_kind).field_prefix || 'SchemaVersion' AS member
                 UNION ALL
                 SELECT m.member FROM outbox.receipt_kind_members AS m
                  WHERE m.receipt_kind = (p_kind).receipt_kind AND m.required) AS r
          WHERE NOT p_doc ? r.member
         HAVING pg_catalog.count(*) > 0),
        -- 3. integers (R-AK-1a): a JSON integer written without fraction or exponent (read from the
        --    json text: jsonb prints 1e0 as 1), |n| <= 2^53-1, not below the registered minimum
        (SELECT i.problem
           FROM (SELECT i.o, i.member,
                        CASE WHEN pg_catalog.jsonb_typeof(p_doc -> i.member) <> 'number'
                             THEN pg_catalog.format('member %s must be a JSON integer', pg_catalog.to_json(i.member)::text)
                             WHEN p_receipt ->> i.member !~ '^-?(0|[1-9][0-9]*)$'
                             THEN pg_catalog.format('%s %s must be an integer written without fraction or exponent',
                                                    pg_catalog.to_json(i.member)::text, p_receipt ->> i.member)
                             WHEN pg_catalog.abs((p_receipt ->> i.member)::numeric) > 9007199254740991
                             THEN pg_catalog.format('%s %s is not a safe integer (|n| <= 2^53-1)',
                                                    pg_catalog.to_json(i.member)::text, p_receipt ->> i.member)
                             WHEN (p_receipt ->> i.member)::numeric < i.minimum
                             THEN pg_catalog.format('%s %s is below its minimum %s',
                                                    pg_catalog.to_json(i.member)::text, p_receipt ->> i.member, i.minimum)
                        END AS problem
                   FROM (SELECT 0 AS o, (p_kind).field_prefix || 'SchemaVersion' AS member, NULL::bigint AS minimum
                         UNION ALL
                         SELECT 1, m.member, m.minimum FROM outbox.receipt_kind_members AS m
                          WHERE m.receipt_kind = (p_kind).receipt_kind AND m.json_type = 'integer') AS i
                  WHERE p_doc ? i.member) AS i
          WHERE i.problem IS NOT NULL
          ORDER BY i.o, i.member COLLATE "C"
          LIMIT 1),
        -- 4. the kind's schema version and digest algorithms
        CASE WHEN p_doc -> ((p_kind).field_prefix || 'SchemaVersion') IS DISTINCT FROM pg_catalog.to_jsonb((p_kind).receipt_schema_version)
             THEN pg_catalog.format('%sSchemaVersion %s: %s receipts use schema version %s', (p_kind).field_prefix,
                                    p_doc -> ((p_kind).field_prefix || 'SchemaVersion'), (p_kind).receipt_kind, (p_kind).receipt_schema_version)
             WHEN p_doc -> ((p_kind).field_prefix || 'DigestAlgorithmVersion') IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb
               OR p_doc -> 'eventEnvelopeDigestAlgorithmVersion' IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb
             THEN pg_catalog.format('%sDigestAlgorithmVersion and eventEnvelopeDigestAlgorithmVersion must be jcs-sha256-v1', (p_kind).field_prefix)
        END)
$fn$;

COMMENT ON FUNCTION outbox._receipt_problem(outbox.receipt_kinds, json, jsonb) IS
    'Private: the closed-receipt rule (members, types, required members, integer form, schema version, digest algorithm) - NULL or the problem; shared by outbox._ack_problem and inbox.record_receipt (SPEC R-AK-1a).';
REVOKE ALL ON FUNCTION outbox._receipt_problem(outbox.receipt_kinds, json, jsonb) FROM PUBLIC;

DROP FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text);
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
CREATE FUNCTION outbox._ack_problem(p_delivery outbox.outbox_deliveries, p_event outbox.outbox_events,
                                    p_kind outbox.receipt_kinds, p_ack json, p_receipt json, p_candidate text)
RETURNS text
LANGUAGE plpgsql
STABLE
-- search_path: not SET here on purpose - a SET clause costs a GUC save/restore on every call;
-- this private helper runs only inside the pinned search_path of its SECURITY DEFINER callers and
-- schema-qualifies everything.
AS $fn$
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
$fn$;

COMMENT ON FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text) IS
    'Private: the ack rule - NULL when an ActiveConsumerAck@1 and its receipt body match the frozen delivery, destination receipt kind and event, else the OB002 detail (SPEC R-AK-1, R-AK-1a, R-AK-2, D-2).';
REVOKE ALL ON FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text) FROM PUBLIC;

DROP FUNCTION inbox.record_receipt(text, text, integer, json, json, text, uuid);
-- inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_envelope json, p_receipt json, p_receipt_digest_candidate text DEFAULT NULL,
--   p_build_token uuid DEFAULT NULL) RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text)
-- (public, SPEC R-CO-1, R-AK-1a, D-2, R-PV-1, §13; how it works: docs/contract.md "The inbox")
-- Purpose: insert-or-compare of a content-addressed consumer receipt inside the consumer's
--   transaction: 'new' (inserted) or 'existing' (the first receipt's ref and digest). The envelope
--   digest is the database's own; the receipt must pass the closed-receipt rule shared with the
--   producer (outbox._receipt_problem) and agree with the call, the envelope and the registry.
-- SQLSTATEs: 42501 caller not bound to consumer_name; OB301 same event id, other envelope digest;
--   OB002 receipt invalid, not closed or inconsistent (or a candidate not the receipt's, or a ref
--   naming another receipt); OB105 envelope unusable; OB201 not canonicalizable; 22023 bad key;
--   OB802 projection version unregistered/retired; OB001 missing/stale build token.
-- Caller: outbox_consumer (its login role); SECURITY DEFINER: it has no table grants.
CREATE FUNCTION inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                     p_event_envelope json, p_receipt json,
                                     p_receipt_digest_candidate text DEFAULT NULL,
                                     p_build_token uuid DEFAULT NULL)
RETURNS TABLE (outcome text, receipt_ref text, receipt_digest text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
    v_env                jsonb;
    v_env_sha            text;
    v_event_id           uuid;
    v_rtext              text;
    v_doc                jsonb;
    v_kind               outbox.receipt_kinds;
    v_p                  text;
    v_dest_consumer      text;
    v_dest_kind          text;
    v_version_state      text;
    v_member             text;
    v_problem            text;
    v_time_text          text;
    v_time               timestamptz;
    v_ref                text;
    v_digest             text;
    v_expected           text;
    v_cut                text;
    v_complete           boolean;
    v_text               text;
    v_inserted           boolean;
    v_existing           inbox.inbox_receipts;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role

    -- The envelope digest (D-2): sha256 of the bytes when they are canonical, else canonicalized
    -- here (OB201 if not canonicalizable). Either way jcs-sha256-v1 of the envelope.
    IF p_event_envelope IS NULL OR pg_catalog.json_typeof(p_event_envelope) <> 'object' THEN
        RAISE EXCEPTION 'envelope invalid: not a JSON object' USING ERRCODE = 'OB105';
    END IF;
    -- R-SEC-5: bounded inputs (an envelope the kernel appended is at most max_payload_bytes plus
    -- the generated eventId/occurredAt; a receipt is a small closed document).
    IF pg_catalog.octet_length(p_event_envelope::text)
       > coalesce((SELECT k.value FROM outbox.kernel_settings AS k WHERE k.name = 'max_payload_bytes'), 1048576) + 1024 THEN
        RAISE EXCEPTION 'envelope invalid: larger than max_payload_bytes'
            USING ERRCODE = 'OB105', DETAIL = 'the envelope is larger than any event append_event accepts (outbox.kernel_settings max_payload_bytes)';
    END IF;
    IF p_receipt IS NOT NULL AND pg_catalog.octet_length(p_receipt::text) > 65536 THEN
        RAISE EXCEPTION 'receipt rejected: larger than 65536 bytes' USING ERRCODE = 'OB002';
    END IF;
    IF outbox._jcs_text_problem(p_event_envelope::text) IS NULL THEN
        v_env_sha := outbox._sha256_hex(p_event_envelope::text);
    ELSE
        v_env_sha := outbox.jcs_sha256(p_event_envelope);
    END IF;
    v_env := p_event_envelope::jsonb;
    IF pg_catalog.jsonb_typeof(v_env -> 'eventId') IS DISTINCT FROM 'string'
       OR (v_env ->> 'eventId') !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'envelope invalid: eventId'
            USING ERRCODE = 'OB105', DETAIL = 'eventId must be a lower-case UUID string';
    END IF;
    v_event_id := (v_env ->> 'eventId')::uuid;
    IF pg_catalog.jsonb_typeof(v_env -> 'eventType') IS DISTINCT FROM 'string'
       OR pg_catalog.jsonb_typeof(v_env -> 'eventSchemaVersion') IS DISTINCT FROM 'string'
       OR pg_catalog.jsonb_typeof(v_env -> 'aggregateId') IS DISTINCT FROM 'string'
       OR (v_env ->> 'aggregateId') = ''
       OR pg_catalog.jsonb_typeof(v_env -> 'aggregateRevision') IS DISTINCT FROM 'number'
       OR (v_env ->> 'aggregateRevision') !~ '^[1-9][0-9]{0,15}$' THEN
        RAISE EXCEPTION 'envelope invalid: identity fields'
            USING ERRCODE = 'OB105',
                  DETAIL = format('event %s: eventType, eventSchemaVersion, aggregateId (strings) and aggregateRevision (integer > 0) are required', v_event_id);
    END IF;

    -- The receipt document and its canonical text (OB201 on duplicate keys or unsafe numbers).
    IF p_receipt IS NULL OR pg_catalog.json_typeof(p_receipt) <> 'object' THEN
        RAISE EXCEPTION 'receipt rejected: not a JSON object' USING ERRCODE = 'OB002';
    END IF;
    IF p_receipt_digest_candidate IS NOT NULL AND outbox._jcs_text_problem(p_receipt::text) IS NULL THEN
        v_rtext := p_receipt::text;
    ELSE
        v_rtext := outbox.jcs_canonicalize(p_receipt);
    END IF;
    v_doc := p_receipt::jsonb;
    v_kind := inbox._inbox_receipt_kind(v_doc);
    v_p := v_kind.field_prefix;

    -- The closed-receipt rule (R-AK-1a), the same for the producer and the inbox: members, types,
    -- required members, integer form, schema version, digest algorithms.
    v_problem := outbox._receipt_problem(v_kind, p_receipt, v_doc);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'receipt rejected: not a closed % receipt', v_kind.receipt_kind
            USING ERRCODE = 'OB002', DETAIL = v_problem, HINT = 'SPEC R-AK-1a: receipts are closed documents (outbox._receipt_problem)';
    END IF;
    IF v_doc -> 'consumerName' IS DISTINCT FROM pg_catalog.to_jsonb(p_consumer_name) THEN
        RAISE EXCEPTION 'receipt rejected: consumerName'
            USING ERRCODE = 'OB002', DETAIL = format('the receipt must name consumer %s', p_consumer_name);
    END IF;
    IF pg_catalog.jsonb_typeof(v_doc -> 'destination') IS DISTINCT FROM 'string'
       OR (v_doc ->> 'destination') !~ '^[a-z0-9][a-z0-9._@-]*$' THEN
        RAISE EXCEPTION 'receipt rejected: destination' USING ERRCODE = 'OB002', DETAIL = 'destination must be a literal (SPEC D-4)';
    END IF;
    -- A destination registered in this database must map to this consumer and receipt kind; the
    -- same statement reads the projection version's state (R-PV-1: one probe, no extra statement).
    SELECT d.consumer_name, d.receipt_kind, pv.state
      INTO v_dest_consumer, v_dest_kind, v_version_state
      FROM (SELECT) AS one
      LEFT JOIN outbox.delivery_destinations AS d ON d.destination = v_doc ->> 'destination'
      LEFT JOIN outbox.projection_versions AS pv
             ON pv.projection_name = v_projection_name AND pv.projection_version = v_projection_version;
    IF v_dest_consumer IS NOT NULL AND (v_dest_consumer <> p_consumer_name OR v_dest_kind <> v_kind.receipt_kind) THEN
        RAISE EXCEPTION 'receipt rejected: destination %', v_doc ->> 'destination'
            USING ERRCODE = 'OB002',
                  DETAIL = format('destination %s is registered for consumer %s with receipt kind %s',
                                  v_doc ->> 'destination', v_dest_consumer, v_dest_kind);
    END IF;
    IF v_doc -> 'eventId' IS DISTINCT FROM v_env -> 'eventId' THEN
        RAISE EXCEPTION 'receipt rejected: eventId'
            USING ERRCODE = 'OB002', DETAIL = format('the receipt must name event %s', v_event_id);
    END IF;
    IF v_doc -> 'eventEnvelopeSha256' IS DISTINCT FROM pg_catalog.to_jsonb(v_env_sha) THEN
        RAISE EXCEPTION 'receipt rejected: eventEnvelopeSha256'
            USING ERRCODE = 'OB002',
                  DETAIL = format('event %s: the receipt''s envelope digest differs from the digest the database computes (%s)', v_event_id, v_env_sha);
    END IF;

    -- Projection coordinates: the call's, never the receipt's own claim.
    IF v_projection_name <> '' OR v_kind.requires_projection THEN
        IF v_projection_name = '' THEN
            RAISE EXCEPTION 'receipt rejected: % receipts need a projection', v_kind.receipt_kind
                USING ERRCODE = 'OB002', DETAIL = 'call record_receipt with the projection name and version the consumer builds';
        END IF;
        IF v_doc -> 'projectionName' IS DISTINCT FROM pg_catalog.to_jsonb(v_projection_name)
           OR v_doc -> 'projectionVersion' IS DISTINCT FROM pg_catalog.to_jsonb(v_projection_version) THEN
            RAISE EXCEPTION 'receipt rejected: projection'
                USING ERRCODE = 'OB002', DETAIL = format('the receipt must name projection %s version %s', v_projection_name, v_projection_version);
        END IF;
    ELSIF v_doc ? 'projectionName' OR v_doc ? 'projectionVersion' THEN
        RAISE EXCEPTION 'receipt rejected: projection fields without a projection'
            USING ERRCODE = 'OB002', DETAIL = 'a consumer without projection records projection_name = '''' and projection_version = 0';
    END IF;
    IF (v_doc ? 'eventType' AND v_doc -> 'eventType' IS DISTINCT FROM v_env -> 'eventType')
       OR (v_doc ? 'eventSchemaVersion' AND v_doc -> 'eventSchemaVersion' IS DISTINCT FROM v_env -> 'eventSchemaVersion') THEN
        RAISE EXCEPTION 'receipt rejected: eventType/eventSchemaVersion'
            USING ERRCODE = 'OB002', DETAIL = format('event %s: the receipt''s event type/schema differ from the envelope''s', v_event_id);
    END IF;

    -- The time field.
    v_time_text := v_doc ->> v_kind.time_field;
    IF pg_catalog.jsonb_typeof(v_doc -> v_kind.time_field) IS DISTINCT FROM 'string'
       OR v_time_text !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN
        RAISE EXCEPTION 'receipt rejected: %', v_kind.time_field
            USING ERRCODE = 'OB002', DETAIL = 'a UTC RFC 3339 time with exactly six fractional digits and Z';
    END IF;
    BEGIN
        v_time := v_time_text::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        RAISE EXCEPTION 'receipt rejected: %', v_kind.time_field
            USING ERRCODE = 'OB002', DETAIL = 'not a valid time';
    END;

    -- Ref: the consumer's (checked here), or the deterministic default (assigned below).
    IF v_doc ? (v_p || 'Ref') THEN
        IF pg_catalog.jsonb_typeof(v_doc -> (v_p || 'Ref')) IS DISTINCT FROM 'string'
           OR (v_doc ->> (v_p || 'Ref')) = '' OR pg_catalog.length(v_doc ->> (v_p || 'Ref')) > 500 THEN
            RAISE EXCEPTION 'receipt rejected: %Ref', v_p
                USING ERRCODE = 'OB002', DETAIL = 'a non-empty string of at most 500 characters (the ack rule''s limit)';
        END IF;
        v_ref := v_doc ->> (v_p || 'Ref');
    END IF;
    IF v_doc ? (v_p || 'Digest')
       AND (pg_catalog.jsonb_typeof(v_doc -> (v_p || 'Digest')) IS DISTINCT FROM 'string'
            OR (v_doc ->> (v_p || 'Digest')) !~ '^[0-9a-f]{64}$') THEN
        RAISE EXCEPTION 'receipt rejected: %Digest', v_p
            USING ERRCODE = 'OB002', DETAIL = 'a jcs-sha256-v1 digest: 64 lower-case hex digits';
    END IF;
    v_complete := v_doc ? (v_p || 'Ref') AND v_doc ? (v_p || 'Digest');

    -- Digest of the candidate (the document minus <prefix>Ref, <prefix>Digest and the time).
    IF p_receipt_digest_candidate IS NULL THEN
        v_digest := outbox.jcs_sha256((v_doc - (v_p || 'Ref') - (v_p || 'Digest') - v_kind.time_field)::json);
    ELSE
        -- v_rtext is canonical and flat (closed: string, integer and boolean members only); cut
        -- the three string members out of it (see the header).
        v_expected := v_rtext;
        FOREACH v_member IN ARRAY ARRAY[v_p || 'Ref', v_p || 'Digest', v_kind.time_field] LOOP
            CONTINUE WHEN NOT v_doc ? v_member;
            v_cut := pg_catalog.to_json(v_member)::text || ':' || pg_catalog.to_json(v_doc ->> v_member)::text;
            IF pg_catalog.strpos(v_expected, ',' || v_cut) > 0 THEN
                v_expected := pg_catalog.replace(v_expected, ',' || v_cut, '');
            ELSE
                v_expected := pg_catalog.replace(v_expected, '{' || v_cut || ',', '{');
            END IF;
        END LOOP;
        IF p_receipt_digest_candidate IS DISTINCT FROM v_expected THEN
            v_problem := outbox._jcs_text_problem(p_receipt_digest_candidate);
            IF v_problem IS NOT NULL THEN
                RAISE EXCEPTION 'receipt digest candidate is not canonical text'
                    USING ERRCODE = 'OB201', DETAIL = v_problem,
                          HINT = 'pass the RFC 8785 canonical text of the candidate, or no candidate (SPEC D-2)';
            END IF;
            RAISE EXCEPTION 'receipt rejected: digest candidate'
                USING ERRCODE = 'OB002',
                      DETAIL = format('event %s: the digest candidate is not the receipt minus %sRef, %sDigest and %s', v_event_id, v_p, v_p, v_kind.time_field);
        END IF;
        v_digest := outbox._sha256_hex(p_receipt_digest_candidate);
    END IF;
    IF v_doc ? (v_p || 'Digest') AND (v_doc ->> (v_p || 'Digest')) <> v_digest THEN
        RAISE EXCEPTION 'receipt rejected: %Digest', v_p
            USING ERRCODE = 'OB002',
                  DETAIL = format('event %s: the receipt digest differs from jcs-sha256-v1 of its candidate (%s)', v_event_id, v_digest);
    END IF;

    -- The stored text: the canonical text of the complete receipt.
    IF v_complete THEN
        v_text := v_rtext;
    ELSE
        IF v_ref IS NULL THEN
            v_ref := inbox._inbox_default_ref(p_consumer_name, v_projection_name, v_projection_version, v_event_id);
            v_doc := v_doc || pg_catalog.jsonb_build_object(v_p || 'Ref', v_ref);
        END IF;
        v_doc := v_doc || pg_catalog.jsonb_build_object(v_p || 'Digest', v_digest);
        v_text := outbox.jcs_canonicalize(v_doc::json);
    END IF;

    -- R-PV-1: the projection version (its state was read with the destination above), checked
    -- after the document so that an invalid receipt is refused as before (OB002/OB201).
    IF p_build_token IS NOT NULL
       OR (v_projection_name <> '' AND v_version_state IS DISTINCT FROM 'active' AND v_version_state IS DISTINCT FROM 'frozen') THEN
        PERFORM inbox._inbox_check_version(v_projection_name, v_projection_version, p_build_token);
    END IF;

    -- Insert-or-compare.
    INSERT INTO inbox.inbox_receipts AS r
           (consumer_name, projection_name, projection_version, event_id, destination, receipt_kind,
            receipt_type, receipt_schema_version, receipt_ref, receipt_digest_algorithm_version,
            receipt_digest, receipt_document, event_type, event_schema_version, aggregate_id,
            aggregate_revision, event_envelope_digest_algorithm_version, event_envelope_sha256, receipt_time)
    VALUES (p_consumer_name, v_projection_name, v_projection_version, v_event_id, v_doc ->> 'destination',
            v_kind.receipt_kind, v_kind.receipt_type, v_kind.receipt_schema_version, v_ref, 'jcs-sha256-v1',
            v_digest, v_text, v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_env ->> 'aggregateId',
            (v_env ->> 'aggregateRevision')::bigint, 'jcs-sha256-v1', v_env_sha, v_time)
    ON CONFLICT DO NOTHING
    RETURNING true INTO v_inserted;

    IF v_inserted THEN
        RETURN QUERY SELECT 'new'::text, v_ref, v_digest;
        RETURN;
    END IF;

    SELECT r.* INTO v_existing
      FROM inbox.inbox_receipts r
     WHERE r.consumer_name = p_consumer_name AND r.projection_name = v_projection_name
       AND r.projection_version = v_projection_version AND r.event_id = v_event_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'receipt rejected: ref % already names another receipt', v_ref
            USING ERRCODE = 'OB002', DETAIL = format('consumer %s: receipt refs are unique per consumer', p_consumer_name);
    END IF;
    IF v_existing.event_envelope_digest_algorithm_version <> 'jcs-sha256-v1'
       OR v_existing.event_envelope_sha256 <> v_env_sha THEN
        RAISE EXCEPTION 'receipt conflict: event % was already received with a different envelope digest', v_event_id
            USING ERRCODE = 'OB301',
                  DETAIL = format('consumer %s projection %s@%s: recorded %s, now %s', p_consumer_name, v_projection_name,
                                  v_projection_version, v_existing.event_envelope_sha256, v_env_sha),
                  HINT = 'same event id with different content: an integrity conflict, never retried (SPEC R-CO-1)';
    END IF;
    RETURN QUERY SELECT 'existing'::text, v_existing.receipt_ref, v_existing.receipt_digest;
END
$fn$;

COMMENT ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text, uuid) IS
    'Insert-or-compare of a content-addressed, closed consumer receipt: new | existing (first receipt''s ref/digest); OB301 same event id with a different envelope digest; OB002 inconsistent or open receipt, or a candidate that is not the receipt''s; OB201 not canonicalizable (hot path: candidate not canonical text); OB802 unregistered projection version, OB001 missing/stale build token of a shadow version. SPEC R-CO-1, R-AK-1a, D-2, R-PV-1, §13.';
REVOKE ALL ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text, uuid) TO outbox_consumer;

-- the hot predicate's member piece takes the member's minimum instead of the kind's name (a
-- database migrated before this file changed still has the old signature)
DROP FUNCTION IF EXISTS outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, text);
-- outbox._receipt_member_piece(p_receipt jsonb, p_member text, p_json_type text,
--   p_projection_name text, p_projection_version integer, p_event_type text,
--   p_event_schema_version text, p_minimum bigint) RETURNS text
-- (private, SPEC R-AK-1a, R-AK-2, HP-1, HP-2)
-- Purpose: one registered member of a receipt kind in the canonical text the ack predicate of
--   outbox.ack_deliveries rebuilds: ',"<member>":<value>' when the receipt carries the member
--   with its registered JSON type (integers without fraction or exponent, |n| <= 2^53-1, not
--   below the registered minimum p_minimum) and, where the kernel knows the value, that value
--   (the frozen projection target, the event's type and schema version); NULL when the member is
--   absent or wrong - the rebuilt text then differs from the receipt's and the full rule
--   (outbox._receipt_problem through outbox._ack_problem) decides.
--   A plain SQL expression (no query, no SET clause, not SECURITY DEFINER): PostgreSQL inlines
--   it into the calling statement, so it is never a per-item function call (HP-1).
-- Caller: outbox.ack_deliveries; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._receipt_member_piece(p_receipt jsonb, p_member text, p_json_type text,
                                                        p_projection_name text, p_projection_version integer,
                                                        p_event_type text, p_event_schema_version text, p_minimum bigint)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN p_member IS NOT NULL AND p_receipt ? p_member
                 AND CASE p_json_type
                         WHEN 'string' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'string'
                         WHEN 'boolean' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'boolean'
                         WHEN 'integer' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'number'
                                             AND (p_receipt->p_member)::text ~ '^-?(0|[1-9][0-9]{0,15})$'
                                             AND pg_catalog.abs((p_receipt->p_member)::text::numeric) <= 9007199254740991
                                             AND (p_minimum IS NULL OR (p_receipt->p_member)::text::numeric >= p_minimum)
                         ELSE false END
                 AND CASE p_member
                         WHEN 'projectionName' THEN p_projection_name IS NULL
                                                    OR p_receipt->p_member = pg_catalog.to_jsonb(p_projection_name)
                         WHEN 'projectionVersion' THEN p_projection_name IS NULL
                                                       OR p_receipt->p_member = pg_catalog.to_jsonb(p_projection_version)
                         WHEN 'eventType' THEN p_receipt->p_member = pg_catalog.to_jsonb(p_event_type)
                         WHEN 'eventSchemaVersion' THEN p_receipt->p_member = pg_catalog.to_jsonb(p_event_schema_version)
                         ELSE true END
                THEN ',"' || p_member || '":' || (p_receipt->p_member)::text END
$fn$;

COMMENT ON FUNCTION outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, bigint) IS
    'Private, inlined: ,"member":value of a registered receipt member that has its type and known value, else NULL (SPEC R-AK-1a, HP-1).';
REVOKE ALL ON FUNCTION outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, bigint) FROM PUBLIC;


-- the parsed outcome items: element i of every array is item i, in input order
CREATE TYPE outbox.outcome_items AS (
    ord                      integer[],
    destination              text[],
    event_id                 uuid[],
    attempt_id               uuid[],
    lease_token              uuid[],
    ack                      json[],   -- ack_deliveries: the ack and receipt as sent
    receipt                  json[],
    receipt_jsonb            jsonb[],  -- the receipt parsed once (NULL unless an object)
    receipt_digest_candidate text[],
    error_code               text[],   -- retry_deliveries, quarantine_deliveries
    error_ref                text[],   -- sanitized
    reason                   text[],   -- quarantine_deliveries
    sqlstate                 text[],   -- 22023 for an item with a shape problem, else NULL
    detail                   text[]
);
COMMENT ON TYPE outbox.outcome_items IS
    'An ack/retry/quarantine batch parsed once (outbox._outcome_items): typed parallel arrays, element i = item i. SPEC R-AK-9, HP-2.';
-- outbox._outcome_items(p_items json, p_call text) RETURNS outbox.outcome_items
-- (private, SPEC R-AK-9, HP-1, HP-2; details in docs/contract.md "Batch outcomes")
-- Purpose: THE parse of an outcome batch for p_call = ack_deliveries | retry_deliveries |
--   quarantine_deliveries: one value of the composite outbox.outcome_items (typed parallel
--   arrays, element i = item i in input order). Acks in the layout internal/pgcall sends are
--   read by one json_to_recordset (fast form); any other batch goes through the generic
--   parser outbox._batch_items, and each item's 22023 problem (shape, receiptDigestCandidate,
--   reason, errorCode, errorRef) is in sqlstate/detail. errorRef is sanitized.
-- One call per batch, never per item (HP-1). SQLSTATEs (whole call, from outbox._batch_items):
--   22023 not a JSON array or more than 1000 items; OB201 unreadable (\u0000).
-- Callers: outbox.ack_deliveries, retry_deliveries, quarantine_deliveries; granted to nobody.
CREATE FUNCTION outbox._outcome_items(p_items json, p_call text)
RETURNS outbox.outcome_items
LANGUAGE plpgsql
STABLE
-- search_path: not SET on purpose (see outbox._batch_items); everything is schema-qualified.
AS $fn$
DECLARE
    r              outbox.outcome_items;
    v_fast         boolean;
    v_n            bigint;
    v_text_event   text[];
    v_text_attempt text[];
    v_text_token   text[];
BEGIN
    IF p_call = 'ack_deliveries' AND p_items IS NOT NULL AND pg_catalog.json_typeof(p_items) = 'array' THEN
        -- Fast form: the batch is the compact layout of internal/pgcall when the array's text
        -- equals the items rebuilt from the parsed columns and every id is a canonical UUID.
        BEGIN
            -- (one sort, in the subquery: the aggregates read its rows in input order)
            SELECT pg_catalog.count(*),
                   pg_catalog.btrim(p_items::text, E' \n\r\t') =
                       '[' || pg_catalog.string_agg(pg_catalog.format(
                                  '{"destination":%s,"eventId":%s,"attemptId":%s,"leaseToken":%s,"ack":%s,"receipt":%s%s}',
                                  pg_catalog.to_json(x.destination), pg_catalog.to_json(x.event_id), pg_catalog.to_json(x.attempt_id),
                                  pg_catalog.to_json(x.lease_token), x.ack, x.receipt,
                                  ',"receiptDigestCandidate":' || x.cand::text), ',') || ']'
                   AND pg_catalog.bool_and(x.cand IS NULL OR pg_catalog.json_typeof(x.cand) = 'string'),
                   pg_catalog.array_agg(x.ord::integer), pg_catalog.array_agg(x.destination),
                   pg_catalog.array_agg(x.event_id), pg_catalog.array_agg(x.attempt_id),
                   pg_catalog.array_agg(x.lease_token),
                   pg_catalog.array_agg(x.ack), pg_catalog.array_agg(x.receipt),
                   pg_catalog.array_agg(CASE WHEN pg_catalog.json_typeof(x.receipt) = 'object' THEN x.receipt::jsonb END),
                   pg_catalog.array_agg(x.cand::jsonb #>> '{}')
              INTO v_n, v_fast, r.ord, r.destination, v_text_event, v_text_attempt, v_text_token,
                   r.ack, r.receipt, r.receipt_jsonb, r.receipt_digest_candidate
              FROM (SELECT q.*
                      FROM ROWS FROM (pg_catalog.json_to_recordset(p_items)
                                      AS (destination text, "eventId" text, "attemptId" text, "leaseToken" text,
                                          ack json, receipt json, "receiptDigestCandidate" json))
                           WITH ORDINALITY AS q(destination, event_id, attempt_id, lease_token, ack, receipt, cand, ord)
                     ORDER BY q.ord) AS x;
            -- uuid_in raises on anything but a UUID; another accepted spelling (upper case, no
            -- hyphens) differs from its canonical text: both go to the generic parser
            r.event_id := v_text_event::uuid[];
            r.attempt_id := v_text_attempt::uuid[];
            r.lease_token := v_text_token::uuid[];
            v_fast := v_fast AND r.event_id::text[] = v_text_event AND r.attempt_id::text[] = v_text_attempt
                      AND r.lease_token::text[] = v_text_token;
        EXCEPTION WHEN OTHERS THEN
            v_fast := false; -- not in the fast form: the generic parser decides (and raises what it must)
        END;
        IF coalesce(v_fast, false) AND v_n <= 1000 THEN
            r.sqlstate := pg_catalog.array_fill(NULL::text, ARRAY[v_n::integer]);
            r.detail := r.sqlstate;
            RETURN r;
        END IF;
    END IF;

    -- Generic form: outbox._batch_items (shape, fence fields) plus the call's own members.
    SELECT pg_catalog.array_agg(x.ord), pg_catalog.array_agg(x.destination),
           pg_catalog.array_agg(x.event_id), pg_catalog.array_agg(x.attempt_id),
           pg_catalog.array_agg(x.lease_token),
           pg_catalog.array_agg(x.item->'ack'), pg_catalog.array_agg(x.item->'receipt'),
           pg_catalog.array_agg(CASE WHEN pg_catalog.jsonb_typeof(x.item_jsonb->'receipt') = 'object'
                                     THEN x.item_jsonb->'receipt' END),
           pg_catalog.array_agg(CASE WHEN pg_catalog.jsonb_typeof(x.item_jsonb->'receiptDigestCandidate') = 'string'
                                     THEN x.item_jsonb->>'receiptDigestCandidate' END),
           pg_catalog.array_agg(x.item_jsonb->>'errorCode'),
           pg_catalog.array_agg(outbox._dispatch_sanitize_ref(x.item_jsonb->>'errorRef')),
           pg_catalog.array_agg(x.item_jsonb->>'reason'),
           pg_catalog.array_agg(CASE WHEN x.problem IS NOT NULL THEN '22023' END),
           pg_catalog.array_agg(x.problem)
      INTO r.ord, r.destination, r.event_id, r.attempt_id, r.lease_token, r.ack, r.receipt, r.receipt_jsonb,
           r.receipt_digest_candidate, r.error_code, r.error_ref, r.reason, r.sqlstate, r.detail
      FROM (SELECT b.ord, b.item, b.item_jsonb, b.destination, b.event_id, b.attempt_id, b.lease_token,
                   coalesce(b.shape_problem, c.problem) AS problem
              FROM outbox._batch_items(p_items, p_call,
                                       CASE p_call
                                           WHEN 'ack_deliveries'
                                           THEN ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'ack', 'receipt', 'receiptDigestCandidate']
                                           WHEN 'retry_deliveries'
                                           THEN ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'errorCode', 'errorRef']
                                           ELSE ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'reason', 'errorCode', 'errorRef'] END,
                                       ARRAY[]::text[]) AS b
              LEFT JOIN outbox.error_codes AS rc
                     ON p_call = 'quarantine_deliveries' AND rc.code = b.item_jsonb->>'reason' AND NOT rc.retryable
              LEFT JOIN outbox.error_codes AS ec
                     ON p_call <> 'ack_deliveries' AND ec.code = b.item_jsonb->>'errorCode'
             CROSS JOIN LATERAL (
                    SELECT CASE
                        WHEN b.shape_problem IS NOT NULL THEN NULL
                        WHEN p_call = 'ack_deliveries'
                        THEN CASE WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'receiptDigestCandidate') NOT IN ('string', 'null')
                                  THEN pg_catalog.format('item %s: receiptDigestCandidate must be a string', b.ord) END
                        WHEN p_call = 'quarantine_deliveries'
                             AND (pg_catalog.jsonb_typeof(b.item_jsonb->'reason') <> 'string' OR rc.code IS NULL)
                        THEN pg_catalog.format('reason %s is not a non-retryable code of outbox.error_codes', b.item_jsonb->'reason')
                        WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'errorCode') <> 'string' OR ec.code IS NULL
                        THEN pg_catalog.format('error_code %s is not in outbox.error_codes', b.item_jsonb->'errorCode')
                        WHEN p_call = 'retry_deliveries' AND NOT ec.retryable
                        THEN pg_catalog.format('error_code %s is non-retryable: use quarantine_delivery', ec.code)
                        WHEN b.item_jsonb->'errorRef' IS NOT NULL AND pg_catalog.jsonb_typeof(b.item_jsonb->'errorRef') NOT IN ('string', 'null')
                        THEN 'errorRef must be a string'
                    END AS problem
                  ) AS c
             ORDER BY b.ord) AS x;
    RETURN r;
END
$fn$;

COMMENT ON FUNCTION outbox._outcome_items(json, text) IS
    'Private: the one parse of an ack/retry/quarantine batch into outbox.outcome_items (typed parallel arrays in input order, per-item 22023 problems); one call per batch (SPEC R-AK-9, HP-1, HP-2).';
REVOKE ALL ON FUNCTION outbox._outcome_items(json, text) FROM PUBLIC;

DROP FUNCTION outbox.ack_deliveries(json);
-- outbox.ack_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-1..4, R-AK-9, D-2, §12a HP-1..HP-4, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many ActiveConsumerAck@1 outcomes in one call and one transaction. p_items: a JSON array
--   (at most 1000) of {destination, eventId, attemptId, leaseToken, ack, receipt,
--   receiptDigestCandidate?}, parsed once by outbox._outcome_items. One row per item, in input
--   order: complete | not_complete | rejected with sqlstate and detail: 22023 (item shape), OB001
--   (fencing; a delivery named twice), OB002 (the ack rule, outbox._ack_problem). A rejected item
--   changes nothing. ONE statement judges every item by a cheap predicate; the full rule
--   (outbox._ack_item_problem) runs only for the items it rejects (HP-1). Plans: index lookups only
--   (HP-3). Time: clock_timestamp() once per call; publication (outbox._publish_events) its own.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable
--   (\u0000); OB002 publication finds an acknowledged delivery inconsistent with its event.
-- Caller: outbox_dispatcher (also through outbox.ack_delivery, a batch of one).
CREATE FUNCTION outbox.ack_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan
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
    v_rcb       jsonb[];
    v_cand      text[];
    v_state     text[];
    v_detail    text[];
    v_ctid      tid[];
    v_dup       boolean;
    v_events    uuid[];
    v_acked_dest  text[];
    v_acked_event uuid[];
    v_published uuid[];
BEGIN
    -- 1. parse once (HP-2): the one parser of outcome batches
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.ack, p.receipt, p.receipt_jsonb,
           p.receipt_digest_candidate, p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_rcb, v_cand, v_state, v_detail
      FROM outbox._outcome_items(p_items, 'ack_deliveries') AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    SELECT pg_catalog.count(*) <> pg_catalog.count(DISTINCT (u.dest, u.ev)) INTO v_dup
      FROM unnest(v_dest, v_event) AS u(dest, ev);

    -- 2. lock the named deliveries in a fixed order (concurrent batches cannot deadlock on them)
    PERFORM outbox._lock_deliveries(v_dest, v_event);

    -- 3. judge every item in one statement (a fresh statement: it sees the committed state of
    --    the rows locked above). fast_ok is the cheap predicate; the full rule runs only where it
    --    is false (a MATERIALIZED CTE evaluates each CASE once per item).
    WITH kinds AS MATERIALIZED (
        -- per destination of the batch, its receipt kind's canonical texts as format() templates,
        -- members in RFC 8785 order (COLLATE "C"; every member name is ASCII), each member
        -- written with a leading comma: %1$s time, %2$s Ref, %3$s Digest, %4$s consumerName,
        -- %5$s destination, %6$s eventEnvelopeSha256, %7$s eventId, %8$s SchemaVersion, and
        -- %9$s..%16$s the kind's registered members (outbox._receipt_member_piece, in member
        -- order; a kind with more than 8 has no template: its acks take the full rule)
        SELECT dd.destination AS k_dest, rk.receipt_kind, rk.receipt_type, rk.field_prefix AS p, rk.time_field,
               (SELECT '{' || pg_catalog.string_agg(t.piece, ',' ORDER BY t.k COLLATE "C") || '}'
                  FROM (VALUES ('kind', '"kind":' || pg_catalog.to_json(rk.receipt_kind)::text),
                               (rk.field_prefix || 'Ref', '"' || rk.field_prefix || 'Ref":%1$s'),
                               (rk.field_prefix || 'SchemaVersion', '"' || rk.field_prefix || 'SchemaVersion":%2$s'),
                               (rk.field_prefix || 'DigestAlgorithmVersion', '"' || rk.field_prefix || 'DigestAlgorithmVersion":"jcs-sha256-v1"'),
                               (rk.field_prefix || 'Digest', '"' || rk.field_prefix || 'Digest":%3$s')) AS t(k, piece)) AS ar_tmpl,
               CASE WHEN mm.n <= 8 THEN t.rc_tmpl END AS rc_tmpl,
               CASE WHEN mm.n <= 8 THEN t.cand_tmpl END AS cand_tmpl,
               coalesce(mm.mem, '{}'::text[]) AS mem, coalesce(mm.typ, '{}'::text[]) AS typ,
               coalesce(mm.mins, '{}'::bigint[]) AS mins,
               coalesce(mm.required, '{}'::text[]) AS required
          FROM outbox.delivery_destinations AS dd
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         CROSS JOIN LATERAL (
                SELECT pg_catalog.count(*) AS n,
                       pg_catalog.array_agg(m.member ORDER BY m.member COLLATE "C") AS mem,
                       pg_catalog.array_agg(m.json_type ORDER BY m.member COLLATE "C") AS typ,
                       pg_catalog.array_agg(m.minimum ORDER BY m.member COLLATE "C") AS mins,
                       pg_catalog.array_agg(m.member) FILTER (WHERE m.required) AS required
                  FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = rk.receipt_kind
              ) AS mm
         CROSS JOIN LATERAL (
                SELECT pg_catalog.string_agg(b.piece, '' ORDER BY b.k COLLATE "C") AS rc_tmpl,
                       pg_catalog.string_agg(b.piece, '' ORDER BY b.k COLLATE "C") FILTER (WHERE b.in_candidate) AS cand_tmpl
                  FROM (SELECT v.k, v.piece, v.in_candidate
                          FROM (VALUES (rk.time_field, ',"' || rk.time_field || '":%1$s', false),
                                       (rk.field_prefix || 'Ref', ',"' || rk.field_prefix || 'Ref":%2$s', false),
                                       (rk.field_prefix || 'Digest', ',"' || rk.field_prefix || 'Digest":%3$s', false),
                                       ('consumerName', ',"consumerName":%4$s', true),
                                       ('destination', ',"destination":%5$s', true),
                                       ('eventEnvelopeSha256', ',"eventEnvelopeSha256":%6$s', true),
                                       ('eventId', ',"eventId":%7$s', true),
                                       (rk.field_prefix || 'SchemaVersion', ',"' || rk.field_prefix || 'SchemaVersion":%8$s', true),
                                       ('eventEnvelopeDigestAlgorithmVersion', ',"eventEnvelopeDigestAlgorithmVersion":"jcs-sha256-v1"', true),
                                       (rk.field_prefix || 'DigestAlgorithmVersion', ',"' || rk.field_prefix || 'DigestAlgorithmVersion":"jcs-sha256-v1"', true)
                               ) AS v(k, piece, in_candidate)
                        UNION ALL
                        SELECT m.member, '%' || (8 + m.i)::text || '$s', true
                          FROM pg_catalog.unnest(mm.mem) WITH ORDINALITY AS m(member, i)) AS b
              ) AS t
         WHERE dd.destination IN (SELECT DISTINCT x.dest FROM unnest(v_dest) AS x(dest))
    ), items AS (
        -- rn: the item's place among the items naming the same delivery (counted only when the
        -- batch names a delivery twice - no sort of the items otherwise)
        SELECT x.*,
               CASE WHEN v_dup THEN 1 + (SELECT pg_catalog.count(*) FROM unnest(v_dest, v_event, v_ord) AS y(dest, ev, ord)
                                          WHERE y.dest = x.dest AND y.ev = x.ev AND y.ord < x.ord)
                    ELSE 1 END AS rn
          FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_rcb, v_cand, v_state, v_detail)
               AS x(ord, dest, ev, att, tok, ack, rc, rcb, cand, state, detail)
    ), judged AS MATERIALIZED (
        SELECT u.ord, u.state, u.detail, d.ctid AS row_ctid,
               (u.state IS NULL AND u.rn = 1
                AND d.status = 'leased' AND d.current_attempt_id = u.att AND d.lease_token = u.tok
                AND d.lease_expires_at > v_now
                AND k.receipt_type = d.expected_receipt_type
                AND u.rcb ?& k.required
                AND (d.required_projection_name IS NULL OR u.rcb ?& ARRAY['projectionName', 'projectionVersion'])
                AND pg_catalog.jsonb_typeof(u.rcb->(k.p || 'Ref')) = 'string'
                AND pg_catalog.length(u.rcb->>(k.p || 'Ref')) BETWEEN 1 AND 500
                -- (the digest's form needs no test: it must equal the hex sha256 below)
                AND pg_catalog.jsonb_typeof(u.rcb->(k.p || 'Digest')) = 'string'
                -- the time: UTC RFC 3339 with 6 fractional digits and Z, a real date and time
                -- (digits everywhere but the separators, at their places; no regex: cheaper)
                AND pg_catalog.jsonb_typeof(u.rcb->k.time_field) = 'string'
                AND CASE WHEN pg_catalog.length(t.t) = 27
                              AND pg_catalog.translate(t.t, '0123456789', '') = '--T::.Z'
                              AND pg_catalog.substr(t.t, 5, 1) || pg_catalog.substr(t.t, 8, 1) || pg_catalog.substr(t.t, 11, 1)
                                  || pg_catalog.substr(t.t, 14, 1) || pg_catalog.substr(t.t, 17, 1)
                                  || pg_catalog.substr(t.t, 20, 1) || pg_catalog.substr(t.t, 27, 1) = '--T::.Z'
                              AND pg_catalog.substr(t.t, 1, 4) COLLATE "C" <> '0000'
                              AND pg_catalog.substr(t.t, 6, 2) COLLATE "C" BETWEEN '01' AND '12'
                              AND pg_catalog.substr(t.t, 9, 2) COLLATE "C" >= '01'
                              AND pg_catalog.substr(t.t, 12, 2) COLLATE "C" < '24'
                              AND pg_catalog.substr(t.t, 15, 2) COLLATE "C" < '60'
                              AND pg_catalog.substr(t.t, 18, 2) COLLATE "C" < '60'
                         THEN pg_catalog.substr(t.t, 9, 2)::integer
                              <= pg_catalog.date_part('day', pg_catalog.make_date(pg_catalog.substr(t.t, 1, 4)::integer,
                                                                                 pg_catalog.substr(t.t, 6, 2)::integer, 1)
                                                             + interval '1 month' - interval '1 day')
                         ELSE false END
                -- the receipt is exactly its canonical text rebuilt from what the kernel knows
                AND u.rc::text = '{' || pg_catalog.substr(pg_catalog.format(k.rc_tmpl, VARIADIC r.args), 2) || '}'
                -- its digest is jcs-sha256-v1 of the candidate (the same text minus Ref, Digest, time)
                AND pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
                        '{' || pg_catalog.substr(pg_catalog.format(k.cand_tmpl, VARIADIC r.args), 2) || '}', 'UTF8')), 'hex')
                    = u.rcb->>(k.p || 'Digest')
                -- and the ack is exactly the canonical ActiveConsumerAck@1 of that receipt
                AND u.ack::text = pg_catalog.format(
                        '{"appliedReceipt":%s,"consumerName":%s,"destination":%s,"eventEnvelopeDigestAlgorithmVersion":%s,"eventEnvelopeSha256":%s,"eventId":%s}',
                        pg_catalog.format(k.ar_tmpl, u.rcb->(k.p || 'Ref'), d.expected_receipt_schema_version, u.rcb->(k.p || 'Digest')),
                        pg_catalog.to_json(d.consumer_name), pg_catalog.to_json(d.destination),
                        pg_catalog.to_json(e.event_envelope_digest_algorithm_version),
                        pg_catalog.to_json(e.event_envelope_sha256), pg_catalog.to_json(d.event_id::text))
               ) IS TRUE AS fast_ok,
               u.dest, u.ev, u.att, u.tok, u.ack, u.rc, u.cand, u.rn
          FROM items AS u
          LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
          LEFT JOIN outbox.outbox_events AS e ON e.event_id = u.ev
          LEFT JOIN kinds AS k ON k.k_dest = u.dest
         CROSS JOIN LATERAL (SELECT u.rcb->>k.time_field AS t) AS t
         CROSS JOIN LATERAL (
                SELECT ARRAY[(u.rcb->k.time_field)::text, (u.rcb->(k.p || 'Ref'))::text, (u.rcb->(k.p || 'Digest'))::text,
                             pg_catalog.to_json(d.consumer_name)::text, pg_catalog.to_json(d.destination)::text,
                             pg_catalog.to_json(e.event_envelope_sha256)::text, pg_catalog.to_json(d.event_id::text)::text,
                             d.expected_receipt_schema_version::text,
                             outbox._receipt_member_piece(u.rcb, k.mem[1], k.typ[1], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[1]),
                             outbox._receipt_member_piece(u.rcb, k.mem[2], k.typ[2], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[2]),
                             outbox._receipt_member_piece(u.rcb, k.mem[3], k.typ[3], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[3]),
                             outbox._receipt_member_piece(u.rcb, k.mem[4], k.typ[4], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[4]),
                             outbox._receipt_member_piece(u.rcb, k.mem[5], k.typ[5], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[5]),
                             outbox._receipt_member_piece(u.rcb, k.mem[6], k.typ[6], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[6]),
                             outbox._receipt_member_piece(u.rcb, k.mem[7], k.typ[7], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[7]),
                             outbox._receipt_member_piece(u.rcb, k.mem[8], k.typ[8], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[8])
                            ] AS args
                OFFSET 0
              ) AS r
    )
    -- only the items the predicate rejected go through the rule itself (the same for one row or
    -- a batch): outbox._ack_item_problem; OFFSET 0 keeps it one call per such item
    SELECT pg_catalog.array_agg(CASE WHEN j.state IS NOT NULL THEN j.state
                                     WHEN j.fast_ok THEN NULL
                                     ELSE v.verdict[1] END ORDER BY j.ord),
           pg_catalog.array_agg(CASE WHEN j.state IS NOT NULL THEN j.detail
                                     WHEN j.fast_ok THEN NULL
                                     ELSE v.verdict[2] END ORDER BY j.ord),
           pg_catalog.array_agg(j.row_ctid ORDER BY j.ord)
      INTO v_state, v_detail, v_ctid
      FROM judged AS j
     CROSS JOIN LATERAL (
            SELECT CASE WHEN j.state IS NULL AND NOT j.fast_ok
                        THEN outbox._ack_item_problem(j.rn, j.dest, j.ev, j.att, j.tok, j.ack, j.rc, j.cand, v_now) END AS verdict
            OFFSET 0
          ) AS v;

    -- 4. the accepted items (R-AK-3): acknowledged with the ack columns (the ack equals the
    --    delivery, the event and the receipt's quartet: the judge proved it), found by ctid of the
    --    rows locked above, and their success finishes (keeping the receipt body for the audit
    --    sweep outbox.verify_ack_digests) - one statement
    WITH ok AS (
        SELECT u.row_ctid, u.dest, u.ev, u.att, u.tok, u.rc, u.rcb
          FROM unnest(v_ctid, v_dest, v_event, v_attempt, v_token, v_receipt, v_rcb, v_state)
               AS u(row_ctid, dest, ev, att, tok, rc, rcb, state)
         WHERE u.state IS NULL
    ), acked AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status                                      = 'acknowledged',
               delivered_at                                = v_now,
               lease_owner                                 = NULL,
               lease_token                                 = NULL,
               lease_expires_at                            = NULL,
               ack_consumer_name                           = d.consumer_name,
               ack_receipt_kind                            = rk.receipt_kind,
               ack_receipt_type                            = rk.receipt_type,
               ack_receipt_ref                             = ok.rcb->>(rk.field_prefix || 'Ref'),
               ack_receipt_schema_version                  = d.expected_receipt_schema_version,
               ack_receipt_digest_algorithm_version        = 'jcs-sha256-v1',
               ack_receipt_digest                          = ok.rcb->>(rk.field_prefix || 'Digest'),
               ack_event_envelope_digest_algorithm_version = ok.rcb->>'eventEnvelopeDigestAlgorithmVersion',
               ack_event_envelope_sha256                   = ok.rcb->>'eventEnvelopeSha256'
          FROM ok
          JOIN outbox.delivery_destinations AS dd ON dd.destination = ok.dest
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         WHERE d.ctid = ok.row_ctid
           -- true of every judged row (locked since step 2, so unchanged); written as one row
           -- comparison so it can only be a filter: the row is found by its ctid (a TID scan),
           -- never through an index a plan made on small tables might prefer (HP-3)
           AND (d.destination, d.event_id, d.status, d.current_attempt_id, d.lease_token)
               IS NOT DISTINCT FROM (ok.dest, ok.ev, 'leased', ok.att, ok.tok)
        RETURNING d.event_id, d.destination, d.current_attempt_id, ok.rc
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref, receipt)
        SELECT acked.current_attempt_id, v_now, 'acknowledged', 'none', NULL, NULL, acked.rc FROM acked
        RETURNING attempt_id
    )
    SELECT pg_catalog.array_agg(DISTINCT acked.event_id), pg_catalog.array_agg(acked.destination),
           pg_catalog.array_agg(acked.event_id)
      INTO v_events, v_acked_dest, v_acked_event
      FROM acked;

    -- 4b. an acknowledged head no longer holds its aggregate's chain (R-CL-6, R-CL-7)
    PERFORM outbox._release_successors(v_acked_dest, v_acked_event, v_now);

    -- 5. publication, once per event (R-AK-4, HP-4)
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
    'Record many ActiveConsumerAck@1 outcomes in one transaction, each fenced and validated by the same rule as ack_delivery (one predicate per batch, the full rule only for rejected items); one row per item in input order: complete | not_complete | rejected (sqlstate, detail). Publication once per completed event. SPEC R-AK-9, D-2, HP-1.';
REVOKE ALL ON FUNCTION outbox.ack_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_deliveries(json) TO outbox_dispatcher;

DROP FUNCTION outbox.retry_deliveries(json);
-- outbox.retry_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-5, R-AK-7, R-AK-9, R-AK-10, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many retryable outcomes in one call and one transaction. p_items: a JSON array (at most
--   1000) of {destination, eventId, attemptId, leaseToken, errorCode, errorRef?}, parsed once by
--   outbox._outcome_items. One row per item in input order: pending (back to pending after the
--   policy's backoff), quarantined (max attempts since the last recovery reached: retry_exhausted;
--   awaiting_revision never exhausts) or rejected with sqlstate and detail: 22023 (shape, unknown
--   or non-retryable code), OB001 (fencing; a delivery named twice). A rejected item changes
--   nothing. Set-based, no per-item function call on the success path (HP-1); plans are index
--   lookups (HP-3). Time: clock_timestamp() once per call.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable.
-- Caller: outbox_dispatcher (also through outbox.retry_delivery, a batch of one).
CREATE FUNCTION outbox.retry_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_ord     integer[];
    v_dest    text[];
    v_event   uuid[];
    v_attempt uuid[];
    v_token   uuid[];
    v_code    text[];
    v_ref     text[];
    v_state   text[];
    v_detail  text[];
    v_outcome text[];
BEGIN
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.error_code, p.error_ref, p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_ref, v_state, v_detail
      FROM outbox._outcome_items(p_items, 'retry_deliveries') AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);
    -- a destination without a policy row gets its default one (register_destination inserts it)
    PERFORM outbox._ensure_retry_policy(x.dest)
       FROM (SELECT DISTINCT d.destination AS dest
               FROM unnest(v_dest, v_event) AS u(dest, ev)
               JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev) AS x
      WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_retry_policies AS rp WHERE rp.destination = x.dest);

    -- judge: fencing, then exhaustion by the policy
    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord),
           pg_catalog.array_agg(j.outcome ORDER BY j.ord)
      INTO v_state, v_detail, v_outcome
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail,
                   CASE WHEN u.state IS NOT NULL OR f.problem IS NOT NULL THEN 'rejected'
                        WHEN d.attempt_count - d.recovery_attempt_base >= rp.max_attempts
                             AND u.code <> 'awaiting_revision' THEN 'quarantined'
                        ELSE 'pending' END AS outcome
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, code, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
              LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = u.dest
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
           ) AS j;

    -- pending: retryable finish, back to pending after the backoff
    WITH ok AS (
        SELECT u.dest, u.ev, u.att, u.tok, u.code, u.ref
          FROM unnest(v_dest, v_event, v_attempt, v_token, v_code, v_ref, v_outcome)
               AS u(dest, ev, att, tok, code, ref, outcome)
         WHERE u.outcome = 'pending'
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
        SELECT ok.att, v_now, 'retryable', 'retry_scheduled', ok.code, ok.ref FROM ok
        RETURNING attempt_id
    )
    UPDATE outbox.outbox_deliveries AS d
       SET status           = 'pending',
           available_at     = v_now + outbox._backoff_delay(rp, d.attempt_count - d.recovery_attempt_base),
           lease_owner      = NULL,
           lease_token      = NULL,
           lease_expires_at = NULL,
           last_error_code  = ok.code,
           last_error_ref   = ok.ref
      FROM ok
      JOIN outbox.outbox_retry_policies AS rp ON rp.destination = ok.dest
     WHERE d.destination = ok.dest AND d.event_id = ok.ev
       AND d.status = 'leased' AND d.current_attempt_id = ok.att AND d.lease_token = ok.tok;

    -- exhausted: quarantined as retry_exhausted (the finish keeps the consumer's code and ref)
    PERFORM outbox._quarantine_write(pg_catalog.array_agg(u.dest), pg_catalog.array_agg(u.ev), pg_catalog.array_agg(u.att),
                                     'retryable', pg_catalog.array_agg('retry_exhausted'::text),
                                     pg_catalog.array_agg(u.code), pg_catalog.array_agg(u.ref), v_now)
       FROM unnest(v_dest, v_event, v_attempt, v_code, v_ref, v_outcome) AS u(dest, ev, att, code, ref, outcome)
      WHERE u.outcome = 'quarantined'
     HAVING pg_catalog.count(*) > 0;

    RETURN QUERY
    SELECT u.dest, u.ev, u.att, u.outcome, u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_outcome, v_state, v_detail)
           AS u(ord, dest, ev, att, outcome, state, detail)
     ORDER BY u.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.retry_deliveries(json) IS
    'Record many retryable outcomes in one transaction, each fenced like retry_delivery; one row per item in input order: pending | quarantined (retry_exhausted) | rejected (sqlstate, detail). awaiting_revision never exhausts. SPEC R-AK-5, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.retry_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retry_deliveries(json) TO outbox_dispatcher;

DROP FUNCTION outbox.quarantine_deliveries(json);
-- outbox.quarantine_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-6, R-AK-7, R-AK-9, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many non-retryable outcomes in one call and one transaction. p_items: a JSON array (at
--   most 1000) of {destination, eventId, attemptId, leaseToken, reason, errorCode, errorRef?},
--   parsed once by outbox._outcome_items: reason a non-retryable code of outbox.error_codes,
--   errorCode any code there, errorRef (sanitized) kept on the finish. One row per item in input
--   order: quarantined (non_retryable finish, terminal state, quarantine row with the event
--   digest) or rejected with sqlstate and detail: 22023 (shape, reason, code), OB001 (fencing; a
--   delivery named twice). Set-based: lock, judge, outbox._quarantine_write. Time:
--   clock_timestamp() once per call.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable.
-- Caller: outbox_dispatcher (also through outbox.quarantine_delivery, a batch of one).
CREATE FUNCTION outbox.quarantine_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_ord     integer[];
    v_dest    text[];
    v_event   uuid[];
    v_attempt uuid[];
    v_token   uuid[];
    v_reason  text[];
    v_code    text[];
    v_ref     text[];
    v_state   text[];
    v_detail  text[];
BEGIN
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.reason, p.error_code, p.error_ref,
           p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_reason, v_code, v_ref, v_state, v_detail
      FROM outbox._outcome_items(p_items, 'quarantine_deliveries') AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);

    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord)
      INTO v_state, v_detail
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
           ) AS j;

    PERFORM outbox._quarantine_write(pg_catalog.array_agg(u.dest), pg_catalog.array_agg(u.ev), pg_catalog.array_agg(u.att),
                                     'non_retryable', pg_catalog.array_agg(u.reason),
                                     pg_catalog.array_agg(u.code), pg_catalog.array_agg(u.ref), v_now)
       FROM unnest(v_dest, v_event, v_attempt, v_reason, v_code, v_ref, v_state)
            AS u(dest, ev, att, reason, code, ref, state)
      WHERE u.state IS NULL
     HAVING pg_catalog.count(*) > 0;

    RETURN QUERY
    SELECT u.dest, u.ev, u.att, CASE WHEN u.state IS NULL THEN 'quarantined' ELSE 'rejected' END, u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_state, v_detail)
           AS u(ord, dest, ev, att, state, detail)
     ORDER BY u.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.quarantine_deliveries(json) IS
    'Record many non-retryable outcomes in one transaction, each fenced like quarantine_delivery; one row per item in input order: quarantined | rejected (sqlstate, detail). SPEC R-AK-6, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.quarantine_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_deliveries(json) TO outbox_dispatcher;


RESET ROLE;
