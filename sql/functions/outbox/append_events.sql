-- outbox.append_events(events json, canonical_texts text[] DEFAULT NULL, event_envelope_sha256s
--   text[] DEFAULT NULL, traceparent text DEFAULT NULL, tracestate text DEFAULT NULL)
--   RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count int)
--   (public, SPEC §3.2, §13, R-AP-1..7, R-AK-9, D-2, D-3; HP-1..4)
-- Purpose: append many EventEnvelope@1 objects inside the caller's business transaction with
--   exactly the rules of outbox.append_event (which is this function with one element): envelope
--   and digest rules (outbox._append_validate), the active definition's quartet frozen, one pending
--   delivery per mandatory member, idempotent re-append of the same digest. One row per element,
--   in input order. The deferred constraint triggers prove every delivery set at COMMIT (R-AP-5).
-- Trace context (R-DP-7): stored beside each new event, never in the envelope; invalid -> 22023
--   (outbox._trace_context_problem). Notes: docs/contract.md#producing-the-sql-api
-- Raises (any invalid element fails the whole call): OB103 no active definition / pair not
--   applicable / no mandatory member; OB105 envelope invalid, eventId reused or archived; OB201.
-- Design notes (hot-path predicate, plans, locking): docs/contract.md#outboxappend_events
-- Caller: outbox_producer.
CREATE OR REPLACE FUNCTION outbox.append_events(p_events json, p_canonical_texts text[] DEFAULT NULL::text[], p_event_envelope_sha256s text[] DEFAULT NULL::text[], p_traceparent text DEFAULT NULL::text, p_tracestate text DEFAULT NULL::text)
 RETURNS TABLE(event_id uuid, event_envelope_sha256 text, delivery_count integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_count     integer;
    v_max_bytes bigint;
    v_trace     text;
BEGIN
    IF p_traceparent IS NOT NULL OR p_tracestate IS NOT NULL THEN
        v_trace := outbox._trace_context_problem(p_traceparent, p_tracestate);
        IF v_trace IS NOT NULL THEN
            RAISE EXCEPTION 'append events: invalid trace context'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = v_trace,
                      HINT = 'pass a W3C traceparent (and optionally tracestate), or NULL for none';
        END IF;
    END IF;
    IF p_events IS NULL THEN
        PERFORM outbox._envelope_fail('events is NULL');
    END IF;
    IF pg_catalog.json_typeof(p_events) <> 'array' THEN
        PERFORM outbox._envelope_fail('events must be a JSON array of EventEnvelope@1 objects');
    END IF;
    v_count := pg_catalog.json_array_length(p_events);
    IF (p_canonical_texts IS NULL) <> (p_event_envelope_sha256s IS NULL) THEN
        PERFORM outbox._envelope_fail('canonical_texts and event_envelope_sha256s go together: pass both or neither');
    END IF;
    IF p_canonical_texts IS NOT NULL AND v_count > 0
       AND (pg_catalog.array_ndims(p_canonical_texts) IS DISTINCT FROM 1
            OR pg_catalog.array_ndims(p_event_envelope_sha256s) IS DISTINCT FROM 1
            OR pg_catalog.array_lower(p_canonical_texts, 1) <> 1
            OR pg_catalog.array_lower(p_event_envelope_sha256s, 1) <> 1
            OR pg_catalog.array_length(p_canonical_texts, 1) <> v_count
            OR pg_catalog.array_length(p_event_envelope_sha256s, 1) <> v_count) THEN
        PERFORM outbox._envelope_fail('canonical_texts and event_envelope_sha256s must have one entry per event, from index 1');
    END IF;
    SELECT k.value INTO v_max_bytes FROM outbox.kernel_settings k WHERE k.name = 'max_payload_bytes';

    RETURN QUERY
    WITH f AS MATERIALIZED (
        -- the cheap predicate (builtins only; every cast guarded by the pattern it needs)
        SELECT k.ord, CASE WHEN NOT k.fast THEN k.raw END AS raw, k.ct, k.sha,
               CASE WHEN k.fast THEN k.j END AS j, k.rev, k.occurred, k.fast
          FROM (SELECT j.ord, j.raw, j.ct, j.sha, j.j, j.rev, j.occurred,
               COALESCE(j.j IS NOT NULL
                   AND j.sha = pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(j.ct, 'UTF8')), 'hex')
                   AND j.rev <= 9007199254740991
                   AND j.occurred IS NOT NULL
                   -- (the pattern admits real times only, each written as to_char writes it back)
                   AND NOT EXISTS (SELECT 1 FROM outbox.envelope_refinements r
                                    WHERE r.event_type = j.j ->> 'eventType' AND r.event_schema_version = j.j ->> 'eventSchemaVersion'
                                      AND NOT (CASE WHEN r.required_field = 'projectId' THEN (j.j -> 'tenant') ? 'projectId'
                                                    ELSE j.j ? r.required_field END))
                   AND j.canonical = j.ct, false) AS fast
          FROM (SELECT a.*,
                       CASE WHEN pg_catalog.jsonb_typeof(a.j -> 'aggregateRevision') = 'number'
                                 AND pg_catalog.scale((a.j -> 'aggregateRevision')::numeric) = 0
                                 AND (a.j -> 'aggregateRevision')::numeric BETWEEN 1 AND 9007199254740991
                            THEN (a.j -> 'aggregateRevision')::numeric::bigint END AS rev,
                       -- occurredAt: YYYY-MM-DDTHH:MM:SS.ffffffZ, a real UTC time (year 0001..9999,
                       -- month 01..12, the month's days, hour 00..23, minute and second 00..59)
                       CASE WHEN pg_catalog.length(a.j ->> 'occurredAt') = 27
                                 AND pg_catalog.translate(a.j ->> 'occurredAt', '0123456789', '') = '--T::.Z'
                                 AND pg_catalog.strpos(a.j ->> 'occurredAt', '-') = 5 AND pg_catalog.substr(a.j ->> 'occurredAt', 8, 1) = '-'
                                 AND pg_catalog.strpos(a.j ->> 'occurredAt', 'T') = 11 AND pg_catalog.strpos(a.j ->> 'occurredAt', ':') = 14
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 17, 1) = ':' AND pg_catalog.strpos(a.j ->> 'occurredAt', '.') = 20
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 27, 1) = 'Z'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 1, 4) COLLATE "C" <> '0000'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 6, 2) COLLATE "C" BETWEEN '01' AND '12'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 9, 2) COLLATE "C" BETWEEN '01' AND '31'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 12, 2) COLLATE "C" <= '23'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 15, 2) COLLATE "C" <= '59'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 18, 2) COLLATE "C" <= '59'
                                 AND (pg_catalog.substr(a.j ->> 'occurredAt', 9, 2) COLLATE "C" <= '28'
                                      OR pg_catalog.substr(a.j ->> 'occurredAt', 9, 2)::integer
                                     <= pg_catalog.date_part('day', pg_catalog.make_date(pg_catalog.substr(a.j ->> 'occurredAt', 1, 4)::integer,
                                                                                         pg_catalog.substr(a.j ->> 'occurredAt', 6, 2)::integer, 1)
                                                                    + interval '1 month - 1 day'))
                            THEN (a.j ->> 'occurredAt')::timestamptz END AS occurred,
                       CASE WHEN pg_catalog.jsonb_typeof(a.j) = 'object'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventId') = 'string'
                                 -- (the patterns of outbox._append_validate, written with translate():
                                 -- a regular expression per element cost more than the rest)
                                 AND pg_catalog.length(a.j ->> 'eventId') = 36
                                 AND pg_catalog.translate(a.j ->> 'eventId', '0123456789abcdef', '') = '----'
                                 AND pg_catalog.strpos(a.j ->> 'eventId', '-') = 9
                                 AND pg_catalog.substr(a.j ->> 'eventId', 14, 1) = '-' AND pg_catalog.substr(a.j ->> 'eventId', 19, 1) = '-'
                                 AND pg_catalog.substr(a.j ->> 'eventId', 24, 1) = '-'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventType') = 'string'
                                 AND pg_catalog.translate(pg_catalog.left(a.j ->> 'eventType', 1), 'abcdefghijklmnopqrstuvwxyz0123456789', '') = ''
                                 AND pg_catalog.translate(a.j ->> 'eventType', 'abcdefghijklmnopqrstuvwxyz0123456789._@-', '') = ''
                                 AND pg_catalog.length(a.j ->> 'eventType') > 0
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventSchemaVersion') = 'string'
                                 AND pg_catalog.translate(pg_catalog.left(a.j ->> 'eventSchemaVersion', 1), 'abcdefghijklmnopqrstuvwxyz0123456789', '') = ''
                                 AND pg_catalog.translate(a.j ->> 'eventSchemaVersion', 'abcdefghijklmnopqrstuvwxyz0123456789._@-', '') = ''
                                 AND pg_catalog.length(a.j ->> 'eventSchemaVersion') > 0
                                 AND pg_catalog.jsonb_typeof(a.j -> 'aggregateId') = 'string' AND pg_catalog.length(a.j ->> 'aggregateId') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant') = 'object'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'tenantKind') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'tenantKind') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'tenantId') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'tenantId') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'workspaceId') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'workspaceId') BETWEEN 1 AND 200
                                 AND (NOT (a.j -> 'tenant') ? 'projectId' OR (pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'projectId') = 'string'
                                                                               AND pg_catalog.length(a.j -> 'tenant' ->> 'projectId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'correlationId' OR (pg_catalog.jsonb_typeof(a.j -> 'correlationId') = 'string'
                                                                    AND pg_catalog.length(a.j ->> 'correlationId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'causationId' OR (pg_catalog.jsonb_typeof(a.j -> 'causationId') = 'string'
                                                                  AND pg_catalog.length(a.j ->> 'causationId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'operationId' OR (pg_catalog.jsonb_typeof(a.j -> 'operationId') = 'string'
                                                                  AND pg_catalog.length(a.j ->> 'operationId') BETWEEN 1 AND 200))
                                 AND pg_catalog.jsonb_typeof(a.j -> 'occurredAt') = 'string'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'payload') = 'object'
                            THEN
                       -- the RFC 8785 text of the envelope, members in their fixed order: only the
                       -- EventEnvelope@1 fields are rebuilt (absent required ones make it NULL), so
                       -- an unknown field, an unknown tenant field or a duplicate name makes it
                       -- differ from the submitted text
                       '{"aggregateId":' || (a.j -> 'aggregateId')::text
                       || ',"aggregateRevision":' || (a.j -> 'aggregateRevision')::text
                       || COALESCE(',"causationId":' || (a.j -> 'causationId')::text, '')
                       || COALESCE(',"correlationId":' || (a.j -> 'correlationId')::text, '')
                       || ',"eventId":' || (a.j -> 'eventId')::text
                       || ',"eventSchemaVersion":' || (a.j -> 'eventSchemaVersion')::text
                       || ',"eventType":' || (a.j -> 'eventType')::text
                       || ',"occurredAt":' || (a.j -> 'occurredAt')::text
                       || COALESCE(',"operationId":' || (a.j -> 'operationId')::text, '')
                       || ',"payload":' || (SELECT '{' || COALESCE(pg_catalog.string_agg(
                              CASE WHEN pg_catalog.octet_length(e1.key) = pg_catalog.length(e1.key) AND pg_catalog.octet_length(e1.key) <= 1024
                                   THEN pg_catalog.to_json(e1.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e1.value)
                                       WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                           CASE WHEN pg_catalog.octet_length(e2.key) = pg_catalog.length(e2.key) AND pg_catalog.octet_length(e2.key) <= 1024
                                                THEN pg_catalog.to_json(e2.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e2.value)
                                                    WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                                        CASE WHEN pg_catalog.octet_length(e3.key) = pg_catalog.length(e3.key) AND pg_catalog.octet_length(e3.key) <= 1024
                                                             THEN pg_catalog.to_json(e3.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e3.value)
                                                                 WHEN 'number' THEN CASE WHEN pg_catalog.scale((e3.value)::numeric) = 0 AND pg_catalog.abs((e3.value)::numeric) <= 9007199254740991 THEN (e3.value)::text END
                                                                 WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                                 ELSE (e3.value)::text END END,
                                                        ',' ORDER BY e3.key COLLATE "C"), '') || '}'
                                                       FROM pg_catalog.jsonb_each(e2.value) AS e3)
                                                    WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                                        CASE pg_catalog.jsonb_typeof(a3.value)
                                                            WHEN 'number' THEN CASE WHEN pg_catalog.scale((a3.value)::numeric) = 0 AND pg_catalog.abs((a3.value)::numeric) <= 9007199254740991 THEN (a3.value)::text END
                                                            WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                            ELSE (a3.value)::text END,
                                                        ',' ORDER BY a3.ordinality), '') || ']'
                                                       FROM pg_catalog.jsonb_array_elements(e2.value) WITH ORDINALITY AS a3(value, ordinality))
                                                    WHEN 'number' THEN CASE WHEN pg_catalog.scale((e2.value)::numeric) = 0 AND pg_catalog.abs((e2.value)::numeric) <= 9007199254740991 THEN (e2.value)::text END
                                                    ELSE (e2.value)::text END END,
                                           ',' ORDER BY e2.key COLLATE "C"), '') || '}'
                                          FROM pg_catalog.jsonb_each(e1.value) AS e2)
                                       WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                           CASE pg_catalog.jsonb_typeof(a2.value)
                                               WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                                   CASE WHEN pg_catalog.octet_length(e3.key) = pg_catalog.length(e3.key) AND pg_catalog.octet_length(e3.key) <= 1024
                                                        THEN pg_catalog.to_json(e3.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e3.value)
                                                            WHEN 'number' THEN CASE WHEN pg_catalog.scale((e3.value)::numeric) = 0 AND pg_catalog.abs((e3.value)::numeric) <= 9007199254740991 THEN (e3.value)::text END
                                                            WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                            ELSE (e3.value)::text END END,
                                                   ',' ORDER BY e3.key COLLATE "C"), '') || '}'
                                                  FROM pg_catalog.jsonb_each(a2.value) AS e3)
                                               WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                                   CASE pg_catalog.jsonb_typeof(a3.value)
                                                       WHEN 'number' THEN CASE WHEN pg_catalog.scale((a3.value)::numeric) = 0 AND pg_catalog.abs((a3.value)::numeric) <= 9007199254740991 THEN (a3.value)::text END
                                                       WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                       ELSE (a3.value)::text END,
                                                   ',' ORDER BY a3.ordinality), '') || ']'
                                                  FROM pg_catalog.jsonb_array_elements(a2.value) WITH ORDINALITY AS a3(value, ordinality))
                                               WHEN 'number' THEN CASE WHEN pg_catalog.scale((a2.value)::numeric) = 0 AND pg_catalog.abs((a2.value)::numeric) <= 9007199254740991 THEN (a2.value)::text END
                                               ELSE (a2.value)::text END,
                                           ',' ORDER BY a2.ordinality), '') || ']'
                                          FROM pg_catalog.jsonb_array_elements(e1.value) WITH ORDINALITY AS a2(value, ordinality))
                                       WHEN 'number' THEN CASE WHEN pg_catalog.scale((e1.value)::numeric) = 0 AND pg_catalog.abs((e1.value)::numeric) <= 9007199254740991 THEN (e1.value)::text END
                                       ELSE (e1.value)::text END END,
                              ',' ORDER BY e1.key COLLATE "C"), '') || '}'
                             FROM pg_catalog.jsonb_each(a.j -> 'payload') AS e1)
                       || ',"tenant":{' || pg_catalog.concat_ws(',',
                              '"projectId":' || (a.j -> 'tenant' -> 'projectId')::text,
                              '"tenantId":' || (a.j -> 'tenant' -> 'tenantId')::text,
                              '"tenantKind":' || (a.j -> 'tenant' -> 'tenantKind')::text,
                              '"workspaceId":' || (a.j -> 'tenant' -> 'workspaceId')::text) || '}}'
                       END AS canonical
                  FROM (
                -- parsed once: the element's text (json_array_elements), its canonical text and digest,
                -- and ONE jsonb of it on the hot path (a \u0000 escape, which no jsonb can hold, and an
                -- oversized element are left to the full rule, which raises what it always did)
                SELECT x.ord::integer AS ord, x.raw, t.ct, t.sha,
                       CASE WHEN t.ct IS NOT NULL AND t.sha IS NOT NULL AND pg_catalog.octet_length(t.ct) <= v_max_bytes
                                 AND x.raw::text = t.ct AND pg_catalog.strpos(t.ct, '\u0000') = 0
                            THEN t.ct::jsonb END AS j
                  FROM pg_catalog.json_array_elements(p_events) WITH ORDINALITY AS x(raw, ord)
                 CROSS JOIN LATERAL (SELECT p_canonical_texts[x.ord::integer] AS ct,
                                            p_event_envelope_sha256s[x.ord::integer] AS sha) AS t
                        OFFSET 0) AS a
                OFFSET 0) AS j
                OFFSET 0) AS k
    ), v AS MATERIALIZED (
        -- accepted by the predicate: the typed columns straight from the jsonb
        SELECT f.ord, (f.j ->> 'eventId')::uuid AS event_id, f.j ->> 'eventType' AS event_type,
               f.j ->> 'eventSchemaVersion' AS schema_version, f.j ->> 'aggregateId' AS aggregate_id,
               f.rev AS aggregate_revision, f.j -> 'tenant' ->> 'tenantKind' AS tenant_kind,
               f.j -> 'tenant' ->> 'tenantId' AS tenant_id, f.j -> 'tenant' ->> 'workspaceId' AS workspace_id,
               f.j -> 'tenant' ->> 'projectId' AS project_id, f.j ->> 'correlationId' AS correlation_id,
               f.j ->> 'causationId' AS causation_id, f.j ->> 'operationId' AS operation_id,
               f.j -> 'payload' AS event_payload, f.occurred AS occurred_at,
               f.sha AS event_envelope_sha256, f.ct AS event_envelope_canonical
          FROM f
         WHERE f.fast
        UNION ALL
        -- every other element: the full rule, element by element in input order (the first
        -- break raises its SQLSTATE and detail)
        SELECT e.ord, (e.r).*
          FROM (SELECT s.ord,
                       outbox._append_validate(s.raw, s.ct, s.sha, v_max_bytes,
                                               CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', s.ord - 1)
                                                    ELSE '' END) AS r
                  FROM (SELECT f.ord, f.raw, f.ct, f.sha FROM f WHERE NOT f.fast ORDER BY f.ord) AS s
                OFFSET 0) AS e
    ), c AS MATERIALIZED (
        -- (scalar subqueries, not joins: one primary-key lookup per element whatever the
        -- planner believes about the tables' sizes when the plan is cached)
        SELECT v.*, a.delivery_set_version, a.definition_schema_version, a.digest_algorithm_version,
               a.definition_digest,
               (SELECT x.event_envelope_sha256 FROM outbox.outbox_events x WHERE x.event_id = v.event_id) AS existing_sha256,
               -- R-RT-1: one primary-key probe of the archive per element
               EXISTS (SELECT 1 FROM outbox.archived_events x WHERE x.event_id = v.event_id) AS archived,
               (SELECT pg_catalog.count(*) FROM outbox.delivery_set_members m
                 WHERE m.delivery_set_version = a.delivery_set_version AND m.event_type = v.event_type
                   AND m.event_schema_version = v.schema_version AND m.mandatory)::integer AS members,
               pg_catalog.min(v.event_envelope_sha256) OVER same_id AS min_sha256,
               pg_catalog.max(v.event_envelope_sha256) OVER same_id AS max_sha256,
               pg_catalog.min(v.ord) OVER same_id AS first_ord
          FROM v
          LEFT JOIN outbox.delivery_set_versions a ON a.status = 'active'
        WINDOW same_id AS (PARTITION BY v.event_id)
    ), checked AS MATERIALIZED (
        -- The definition rules, element by element in input order; the first break raises.
        SELECT o.*
          FROM (SELECT c.*, CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', c.ord - 1) ELSE '' END AS label
                  FROM c ORDER BY c.ord) AS o
         WHERE (CASE
                  WHEN o.delivery_set_version IS NULL THEN
                      outbox._append_fail('OB103', 'no active delivery-set definition', NULL,
                          'register and activate a delivery set (outboxctl release register / activate)')
                  WHEN NOT EXISTS (SELECT 1 FROM outbox.delivery_set_applicable_events ae
                                    WHERE ae.delivery_set_version = o.delivery_set_version
                                      AND ae.event_type = o.event_type AND ae.event_schema_version = o.schema_version) THEN
                      outbox._append_fail('OB103', 'event pair not applicable under the active delivery set',
                          o.label || pg_catalog.format('(%s, %s) is not applicable in delivery set version %s',
                                            o.event_type, o.schema_version, o.delivery_set_version), NULL)
                  WHEN o.archived THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s was archived by the retention procedure and can never be appended again', o.event_id), NULL)
                  WHEN o.existing_sha256 <> o.event_envelope_sha256 THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s already exists with a different envelope digest', o.event_id), NULL)
                  WHEN o.min_sha256 <> o.max_sha256 THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s appears more than once with different envelope digests', o.event_id), NULL)
                  WHEN o.existing_sha256 IS NULL AND o.members = 0 THEN
                      outbox._append_fail('OB103', 'no mandatory member for this event pair',
                          o.label || pg_catalog.format('(%s, %s) has no mandatory member in delivery set version %s',
                                            o.event_type, o.schema_version, o.delivery_set_version), NULL)
                END) IS NULL
    ), fresh AS MATERIALIZED (
        -- new events, each once even when the call repeats it
        SELECT k.* FROM checked k WHERE k.existing_sha256 IS NULL AND k.ord = k.first_ord
    ), chain AS MATERIALIZED (
        -- per_aggregate destinations (R-CL-6, R-CL-7): a new delivery that waits behind an earlier
        -- revision of its aggregate - open in the table, or earlier in this call - is parked at
        -- available_at = 'infinity', outside the claim's index range, so blocked chains cost a
        -- claim nothing; outbox._release_successors makes it claimable when the head ends.
        SELECT f.event_id, m.destination, f.aggregate_id, f.aggregate_revision,
               pg_catalog.row_number() OVER (PARTITION BY m.destination, f.aggregate_id
                                             ORDER BY f.aggregate_revision, f.ord) AS in_call
          FROM fresh f
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = f.delivery_set_version AND m.event_type = f.event_type
           AND m.event_schema_version = f.schema_version AND m.mandatory
          JOIN outbox.delivery_destinations dd ON dd.destination = m.destination AND dd.ordering = 'per_aggregate'
    ), heads AS MATERIALIZED (
        -- the lowest open revision of each such chain
        SELECT h.destination, h.event_id
          FROM (SELECT DISTINCT c.destination, c.aggregate_id FROM chain c) AS k
         CROSS JOIN LATERAL (
                SELECT o.destination, o.event_id
                  FROM outbox.outbox_deliveries o
                 WHERE o.destination = k.destination AND o.aggregate_id = k.aggregate_id
                   AND o.status IN ('pending', 'leased')
                 ORDER BY o.aggregate_revision
                 LIMIT 1) AS h
    ), held AS MATERIALIZED (
        -- held FOR SHARE until commit (in the key order outcome functions lock in): the head
        -- cannot become terminal - and release its successors - before this transaction's parked
        -- rows are visible; one that became terminal meanwhile drops out here (re-checked).
        SELECT d.destination, d.aggregate_id, d.aggregate_revision
          FROM outbox.outbox_deliveries d
          JOIN heads ON d.destination = heads.destination AND d.event_id = heads.event_id
         WHERE d.status IN ('pending', 'leased')
         ORDER BY d.destination, d.event_id
           FOR SHARE OF d
    ), parked AS MATERIALIZED (
        SELECT c.event_id, c.destination
          FROM chain c
         WHERE c.in_call > 1
            OR EXISTS (SELECT 1 FROM held h
                        WHERE h.destination = c.destination AND h.aggregate_id = c.aggregate_id
                          AND h.aggregate_revision < c.aggregate_revision)
    ), inserted_events AS (
        INSERT INTO outbox.outbox_events
            (event_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
             delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
             aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id,
             correlation_id, causation_id, operation_id, event_payload,
             event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, event_envelope_canonical,
             traceparent, tracestate)
        SELECT f.event_id, f.event_type, f.schema_version, f.delivery_set_version, f.definition_schema_version,
               f.digest_algorithm_version, f.definition_digest,
               f.aggregate_id, f.aggregate_revision, f.tenant_kind, f.tenant_id, f.workspace_id, f.project_id,
               f.correlation_id, f.causation_id, f.operation_id, f.event_payload,
               'jcs-sha256-v1', f.event_envelope_sha256, f.occurred_at, f.event_envelope_canonical,
               p_traceparent, NULLIF(p_tracestate, '')
          FROM fresh f
        RETURNING outbox_events.event_id
    ), inserted_deliveries AS (
        -- one pending delivery per mandatory member (R-AP-4, R-AP-6)
        INSERT INTO outbox.outbox_deliveries
            (destination, event_id, delivery_set_version, consumer_name, expected_receipt_type,
             expected_receipt_schema_version, required_projection_name, required_projection_version,
             mandatory, aggregate_id, aggregate_revision, available_at)
        SELECT m.destination, f.event_id, m.delivery_set_version, m.consumer_name, m.expected_receipt_type,
               m.expected_receipt_schema_version, m.projection_name, m.projection_version,
               true, f.aggregate_id, f.aggregate_revision,
               CASE WHEN EXISTS (SELECT 1 FROM parked p WHERE p.event_id = f.event_id AND p.destination = m.destination)
                    THEN 'infinity'::timestamptz ELSE pg_catalog.now() END
          FROM fresh f
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = f.delivery_set_version AND m.event_type = f.event_type
           AND m.event_schema_version = f.schema_version AND m.mandatory
        RETURNING outbox_deliveries.destination
    ), notified AS (
        SELECT pg_catalog.count(pg_catalog.pg_notify('outbox_delivery', n.destination)) AS destinations
          FROM (SELECT DISTINCT d.destination FROM inserted_deliveries d) AS n
    )
    SELECT k.event_id, k.event_envelope_sha256,
           CASE WHEN k.existing_sha256 IS NULL THEN k.members
                ELSE (SELECT pg_catalog.count(*)::integer FROM outbox.outbox_deliveries d WHERE d.event_id = k.event_id) END
      FROM checked k
     CROSS JOIN notified
     ORDER BY k.ord;
END
$function$;

COMMENT ON FUNCTION outbox.append_events(json, text[], text[], text, text) IS
    'Append many EventEnvelope@1 objects (a JSON array) with the rules of append_event, set-based; rows in input order; optional W3C trace context stored beside the events (SPEC §3.2, §13, R-AK-9, R-DP-7, D-2). Raises OB103, OB105, OB201, 22023. Caller: outbox_producer.';

REVOKE ALL ON FUNCTION outbox.append_events(json, text[], text[], text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_events(json, text[], text[], text, text) TO outbox_producer;
