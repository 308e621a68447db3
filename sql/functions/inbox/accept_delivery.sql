-- inbox.accept_delivery(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_id uuid, p_event_envelope_sha256 text, p_aggregate_id text, p_aggregate_revision bigint,
--   p_event_envelope json, p_receipt json, p_receipt_digest_candidate text)
--   RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text, receipt_document json)
--   (public, SPEC R-CO-1..3, R-CO-2, §13; issue 21 item 2, issue 36 item 1)
-- Purpose: the consumer side of one delivery in ONE call (existing-receipt read, revision check,
--   receipt insert-or-compare), so the kit pipelines it with the handler's statements and
--   inbox.confirm_delivery in one transaction. Outcomes: new | existing | gap | duplicate_revision.
--   Hot path (HP-1): an unordered consumer's new receipt is ONE predicate-checked INSERT; the
--   rest, and what its predicates refuse, takes the full path (read_receipt, record_receipt).
-- SQLSTATEs: 42501 caller not bound to consumer_name; OB301 same event id with a different
--   envelope digest; OB002 receipt invalid; OB105 envelope invalid; OB201 not canonical text on
--   the hot path; 22023 invalid key or digest.
-- Design notes (outcomes, locking, the hot path's predicate): docs/contract.md#inboxaccept_delivery
-- Caller: outbox_consumer (the consumer's bound role), SECURITY DEFINER: it has no table grants.
CREATE OR REPLACE FUNCTION inbox.accept_delivery(p_consumer_name text, p_projection_name text, p_projection_version integer, p_event_id uuid, p_event_envelope_sha256 text, p_aggregate_id text, p_aggregate_revision bigint, p_event_envelope json, p_receipt json, p_receipt_digest_candidate text)
 RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text, receipt_document json)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_doc     json;
    v_observe text;
    v_rec     record;
    v_ref     text;
    v_digest  text;
BEGIN
    -- Hot path: an unordered consumer's new receipt, checked by predicates of its INSERT (the
    -- closed-receipt rule as the exact canonical text rebuilt from outbox.receipt_kinds and
    -- outbox.receipt_kind_members with outbox._receipt_member_piece, inlined; the envelope by
    -- sha256 of its bytes = the delivery's digest, D-2 - the producer's database verified at
    -- append that the canonical text has this digest). Each argument parsed once (HP-2). No row
    -- (a predicate refused, or a receipt of the key or ref is stored): the full path below.
    IF p_aggregate_revision IS NULL AND p_receipt_digest_candidate IS NOT NULL
       -- \u0000 cannot become jsonb (22P05): such input is the full path's to refuse (OB105/OB201)
       AND pg_catalog.strpos(p_event_envelope::text, '\u0000') = 0 AND pg_catalog.strpos(p_receipt::text, '\u0000') = 0 THEN
        INSERT INTO inbox.inbox_receipts AS r
               (consumer_name, projection_name, projection_version, event_id, destination, receipt_kind,
                receipt_type, receipt_schema_version, receipt_ref, receipt_digest_algorithm_version,
                receipt_digest, receipt_document, event_type, event_schema_version, aggregate_id,
                aggregate_revision, event_envelope_digest_algorithm_version, event_envelope_sha256, receipt_time)
        SELECT p_consumer_name, a.pn, a.pv, p_event_id, a.doc ->> 'destination', k.receipt_kind, k.receipt_type,
               k.receipt_schema_version, a.doc ->> (k.field_prefix || 'Ref'), 'jcs-sha256-v1', a.cand_sha,
               a.rtext, a.env ->> 'eventType', a.env ->> 'eventSchemaVersion', a.env ->> 'aggregateId',
               (a.env ->> 'aggregateRevision')::bigint, 'jcs-sha256-v1', p_event_envelope_sha256,
               (a.doc ->> k.time_field)::timestamptz
          FROM (SELECT coalesce(p_projection_name, '') AS pn, coalesce(p_projection_version, 0) AS pv,
                       p_event_envelope::jsonb AS env, p_receipt::jsonb AS doc, p_receipt::text AS rtext,
                       pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_receipt_digest_candidate, 'UTF8')), 'hex') AS cand_sha
                OFFSET 0) AS a
         CROSS JOIN inbox._inbox_caller_ok(p_consumer_name) AS cc  -- the inbox's caller rule, inlined (HP-1)
          JOIN outbox.receipt_kinds AS k
            ON a.doc ?| ARRAY[k.field_prefix || 'Ref', k.field_prefix || 'SchemaVersion',
                             k.field_prefix || 'DigestAlgorithmVersion', k.field_prefix || 'Digest']
         CROSS JOIN LATERAL (
                -- the receipt's canonical text and its candidate's, rebuilt: the common members
                -- with the call's values, the kind's registered members that have their type and
                -- known value (NULL piece otherwise: the texts then differ), in RFC 8785 order
                SELECT '{' || pg_catalog.string_agg(t.piece, ',' ORDER BY t.k COLLATE "C") || '}' AS rc,
                       '{' || pg_catalog.string_agg(t.piece, ',' ORDER BY t.k COLLATE "C") FILTER (WHERE t.in_cand) || '}' AS cand,
                       coalesce(pg_catalog.bool_and(t.piece IS NOT NULL) FILTER (WHERE t.required), true) AS required_ok
                  FROM (VALUES (k.time_field, '"' || k.time_field || '":' || (a.doc -> k.time_field)::text, false, true),
                               (k.field_prefix || 'Ref', '"' || k.field_prefix || 'Ref":' || (a.doc -> (k.field_prefix || 'Ref'))::text, false, true),
                               (k.field_prefix || 'Digest', '"' || k.field_prefix || 'Digest":"' || a.cand_sha || '"', false, true),
                               (k.field_prefix || 'SchemaVersion', '"' || k.field_prefix || 'SchemaVersion":' || k.receipt_schema_version::text, true, true),
                               (k.field_prefix || 'DigestAlgorithmVersion', '"' || k.field_prefix || 'DigestAlgorithmVersion":"jcs-sha256-v1"', true, true),
                               ('consumerName', '"consumerName":' || pg_catalog.to_json(p_consumer_name)::text, true, true),
                               ('destination', '"destination":' || (a.doc -> 'destination')::text, true, true),
                               ('eventEnvelopeDigestAlgorithmVersion', '"eventEnvelopeDigestAlgorithmVersion":"jcs-sha256-v1"', true, true),
                               ('eventEnvelopeSha256', '"eventEnvelopeSha256":' || pg_catalog.to_json(p_event_envelope_sha256)::text, true, true),
                               ('eventId', '"eventId":' || pg_catalog.to_json(p_event_id::text)::text, true, true)
                        UNION ALL
                        SELECT m.member,
                               pg_catalog.substr(outbox._receipt_member_piece(a.doc, m.member, m.json_type, NULLIF(a.pn, ''), a.pv,
                                                                              a.env ->> 'eventType', a.env ->> 'eventSchemaVersion',
                                                                              m.minimum, m.max_length), 2),
                               true, m.required
                          FROM outbox.receipt_kind_members AS m
                         WHERE m.receipt_kind = k.receipt_kind) AS t(k, piece, in_cand, required)
              ) AS b
         WHERE -- the caller acts as the consumer and the key is valid
               cc.ok
           AND p_consumer_name ~ '^[a-z0-9][a-z0-9._@-]*$'
           AND CASE WHEN a.pn = '' THEN a.pv = 0 AND NOT k.requires_projection
                                        AND NOT a.doc ?| ARRAY['projectionName', 'projectionVersion']
                    ELSE a.pn ~ '^[a-z0-9][a-z0-9._@-]*$' AND a.pv > 0
                         AND a.doc -> 'projectionName' = pg_catalog.to_jsonb(a.pn)
                         AND a.doc -> 'projectionVersion' = pg_catalog.to_jsonb(a.pv)
                         AND EXISTS (SELECT FROM outbox.projection_versions AS pv
                                      WHERE pv.projection_name = a.pn AND pv.projection_version = a.pv
                                        AND pv.state IN ('active', 'frozen')) END
           -- the envelope: its bytes hash to the delivery's digest, bounded, its identity fields
           AND pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_event_envelope::text, 'UTF8')), 'hex') = p_event_envelope_sha256
           AND pg_catalog.octet_length(p_event_envelope::text)
               <= coalesce((SELECT s.value FROM outbox.kernel_settings AS s WHERE s.name = 'max_payload_bytes'), 1048576) + 1024
           AND a.env ->> 'eventId' = p_event_id::text
           AND pg_catalog.jsonb_typeof(a.env -> 'eventId') = 'string'
           AND pg_catalog.jsonb_typeof(a.env -> 'eventType') = 'string'
           AND pg_catalog.jsonb_typeof(a.env -> 'eventSchemaVersion') = 'string'
           AND pg_catalog.jsonb_typeof(a.env -> 'aggregateId') = 'string' AND a.env ->> 'aggregateId' <> ''
           AND pg_catalog.jsonb_typeof(a.env -> 'aggregateRevision') = 'number'
           AND a.env ->> 'aggregateRevision' ~ '^[1-9][0-9]{0,15}$'
           -- the receipt: one kind, exactly its rebuilt canonical text, its candidate's, bounded
           AND (SELECT pg_catalog.count(*) FROM outbox.receipt_kinds AS k2
                 WHERE a.doc ?| ARRAY[k2.field_prefix || 'Ref', k2.field_prefix || 'SchemaVersion',
                                      k2.field_prefix || 'DigestAlgorithmVersion', k2.field_prefix || 'Digest']) = 1
           AND pg_catalog.octet_length(a.rtext) <= 65536
           AND a.rtext = b.rc
           AND p_receipt_digest_candidate = b.cand
           AND b.required_ok
           AND pg_catalog.jsonb_typeof(a.doc -> 'destination') = 'string'
           AND a.doc ->> 'destination' ~ '^[a-z0-9][a-z0-9._@-]*$'
           AND NOT EXISTS (SELECT FROM outbox.delivery_destinations AS d
                            WHERE d.destination = a.doc ->> 'destination'
                              AND (d.consumer_name <> p_consumer_name OR d.receipt_kind <> k.receipt_kind))
           AND pg_catalog.jsonb_typeof(a.doc -> (k.field_prefix || 'Ref')) = 'string'
           AND a.doc ->> (k.field_prefix || 'Ref') <> ''
           AND pg_catalog.length(a.doc ->> (k.field_prefix || 'Ref')) <= 200
           AND pg_catalog.jsonb_typeof(a.doc -> k.time_field) = 'string'
           -- a real UTC time in the receipt form (a CASE: each test only after the one before)
           AND CASE WHEN a.doc ->> k.time_field !~ '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z$'
                    THEN false
                    WHEN pg_catalog.substr(a.doc ->> k.time_field, 1, 4) = '0000' THEN false
                    ELSE pg_catalog.substr(a.doc ->> k.time_field, 9, 2)::integer
                         <= pg_catalog.date_part('day', pg_catalog.make_date(pg_catalog.substr(a.doc ->> k.time_field, 1, 4)::integer,
                                                                             pg_catalog.substr(a.doc ->> k.time_field, 6, 2)::integer, 1)
                                                        + interval '1 month' - interval '1 day') END
        ON CONFLICT DO NOTHING
        RETURNING r.receipt_ref, r.receipt_digest INTO v_ref, v_digest;
        IF v_ref IS NOT NULL THEN
            RETURN QUERY SELECT 'new'::text, v_ref, v_digest, NULL::json;
            RETURN;
        END IF;
    END IF;

    -- Redelivery: the stored receipt in one read (OB301 when the digest differs).
    v_doc := inbox.read_receipt(p_consumer_name, p_projection_name, p_projection_version, p_event_id, p_event_envelope_sha256);
    IF v_doc IS NOT NULL THEN
        RETURN QUERY SELECT 'existing'::text, NULL::text, NULL::text, v_doc;
        RETURN;
    END IF;
    IF p_aggregate_revision IS NOT NULL THEN
        v_observe := inbox.observe_revision(p_consumer_name, p_projection_name, p_projection_version,
                                            p_aggregate_id, p_aggregate_revision);
        IF v_observe = 'gap' THEN
            RETURN QUERY SELECT 'gap'::text, NULL::text, NULL::text, NULL::json;
            RETURN;
        ELSIF v_observe = 'duplicate' THEN
            -- A concurrent delivery of the same event may have committed while we waited.
            v_doc := inbox.read_receipt(p_consumer_name, p_projection_name, p_projection_version, p_event_id, p_event_envelope_sha256);
            IF v_doc IS NOT NULL THEN
                RETURN QUERY SELECT 'existing'::text, NULL::text, NULL::text, v_doc;
            ELSE
                RETURN QUERY SELECT 'duplicate_revision'::text, NULL::text, NULL::text, NULL::json;
            END IF;
            RETURN;
        END IF;
    END IF;
    SELECT r.outcome, r.receipt_ref, r.receipt_digest INTO STRICT v_rec
      FROM inbox.record_receipt(p_consumer_name, p_projection_name, p_projection_version,
                                p_event_envelope, p_receipt, p_receipt_digest_candidate) AS r;
    IF v_rec.outcome = 'new' THEN
        RETURN QUERY SELECT 'new'::text, v_rec.receipt_ref, v_rec.receipt_digest, NULL::json;
        RETURN;
    END IF;
    -- A concurrent delivery inserted it first: answer with its document.
    v_doc := inbox.read_receipt(p_consumer_name, p_projection_name, p_projection_version, p_event_id, p_event_envelope_sha256);
    RETURN QUERY SELECT 'existing'::text, v_rec.receipt_ref, v_rec.receipt_digest, v_doc;
END
$function$;

COMMENT ON FUNCTION inbox.accept_delivery(text, text, integer, uuid, text, text, bigint, json, json, text) IS
    'One call per delivery (consumer kit hot path): existing receipt read, revision check (ordered), receipt insert-or-compare: new | existing (stored document) | gap | duplicate_revision. SPEC R-CO-1..3, §13.';

REVOKE ALL ON FUNCTION inbox.accept_delivery(text, text, integer, uuid, text, text, bigint, json, json, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.accept_delivery(text, text, integer, uuid, text, text, bigint, json, json, text) TO outbox_consumer;
