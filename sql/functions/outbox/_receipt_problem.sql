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
CREATE OR REPLACE FUNCTION outbox._receipt_problem(p_kind outbox.receipt_kinds, p_receipt json, p_doc jsonb)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
    SELECT coalesce(
        -- 1. closed: every member common or registered for the kind, registered ones of their type
        (SELECT CASE WHEN m.member IS NULL
                     THEN pg_catalog.format('unknown member %s: %s receipts carry only the common members and those of outbox.receipt_kind_members',
                                            pg_catalog.to_json(e.key)::text, (p_kind).receipt_kind)
                     WHEN pg_catalog.jsonb_typeof(e.value) <> CASE m.json_type WHEN 'integer' THEN 'number' ELSE m.json_type END
                     THEN pg_catalog.format('member %s must be a JSON %s', pg_catalog.to_json(e.key)::text, m.json_type)
                     ELSE pg_catalog.format('member %s is longer than its maxLength %s', pg_catalog.to_json(e.key)::text, m.max_length) END
           FROM pg_catalog.jsonb_each(p_doc) AS e
           LEFT JOIN outbox.receipt_kind_members AS m ON m.receipt_kind = (p_kind).receipt_kind AND m.member = e.key
          WHERE e.key <> ALL (ARRAY[(p_kind).field_prefix || 'Ref', (p_kind).field_prefix || 'SchemaVersion',
                                    (p_kind).field_prefix || 'DigestAlgorithmVersion', (p_kind).field_prefix || 'Digest',
                                    'destination', 'consumerName', 'eventId', 'eventEnvelopeDigestAlgorithmVersion',
                                    'eventEnvelopeSha256', (p_kind).time_field])
            AND (m.member IS NULL
                 OR pg_catalog.jsonb_typeof(e.value) <> CASE m.json_type WHEN 'integer' THEN 'number' ELSE m.json_type END
                 OR pg_catalog.length(e.value #>> '{}') > m.max_length)
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
$function$;

COMMENT ON FUNCTION outbox._receipt_problem(outbox.receipt_kinds, json, jsonb) IS
    'Private: the closed-receipt rule (members, types, string maxLength, required members, integer form, schema version, digest algorithm) - NULL or the problem; shared by outbox._ack_problem and inbox.record_receipt (SPEC R-AK-1a).';

REVOKE ALL ON FUNCTION outbox._receipt_problem(outbox.receipt_kinds, json, jsonb) FROM PUBLIC;
