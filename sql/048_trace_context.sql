-- Trace context beside the event (issue 40, SPEC R-DP-7).
-- An optional W3C traceparent/tracestate pair given at append - two trailing arguments with
-- defaults of outbox.append_event and outbox.append_events (§13: extra optional parameters
-- follow) - is stored in two new nullable columns of outbox.outbox_events, beside the event and
-- never inside the digested envelope: event_envelope_canonical, event_envelope_sha256, receipts
-- and the wire body do not change. The rule of a valid pair lives in
-- outbox._trace_context_problem (invalid -> 22023, nothing written). outbox.claim_deliveries
-- returns the pair as two trailing columns (the dispatcher sends them as traceparent/tracestate
-- headers and links its delivery span to them). The event immutability trigger covers the new
-- columns. Archived events do not keep the trace context (an observability hint, not a fact).
-- Signatures change, so the old functions are dropped first (CREATE OR REPLACE would add an
-- overload; a call with three arguments would then be ambiguous).
-- Locks: ACCESS EXCLUSIVE on outbox.outbox_events for ADD COLUMN without default (catalog only,
-- no rewrite, no scan). No backfill: existing events have no trace context.
SET LOCAL ROLE outbox_owner;

ALTER TABLE outbox.outbox_events ADD COLUMN traceparent text, ADD COLUMN tracestate text;
COMMENT ON COLUMN outbox.outbox_events.traceparent IS
    'W3C traceparent given at append (R-DP-7), NULL when none; not part of the envelope or its digest.';
COMMENT ON COLUMN outbox.outbox_events.tracestate IS
    'W3C tracestate given at append with the traceparent (R-DP-7), NULL when none; not part of the envelope or its digest.';

-- outbox._trace_context_problem(p_traceparent text, p_tracestate text) RETURNS text  (private, SPEC R-DP-7)
-- Purpose: the one rule for a W3C Trace Context given at append (https://www.w3.org/TR/trace-context/):
--   NULL when (traceparent, tracestate) may be stored, else the defect, for the caller's DETAIL.
--   traceparent: version-traceid-parentid-flags in lower-case hex; version ff is invalid; version
--   00 is exactly 55 characters; a later version may carry a "-" suffix (forward compatible, as
--   the recommendation asks), 256 characters at most; trace id and parent id not all zeros.
--   tracestate: at most 512 characters and 32 list members, each key=value with the
--   recommendation's key (simple or tenant@system) and value grammar; empty members and
--   optional whitespace around commas allowed; only with a traceparent. The empty string is
--   treated as no tracestate by the callers (they store NULL).
-- SQLSTATEs: none (the caller raises 22023 with the returned detail). IMMUTABLE.
-- Callers: outbox.append_events; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._trace_context_problem(p_traceparent text, p_tracestate text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_member text;
    v_count  integer := 0;
BEGIN
    IF p_traceparent IS NULL THEN
        IF p_tracestate IS NOT NULL AND p_tracestate <> '' THEN
            RETURN 'tracestate without traceparent';
        END IF;
        RETURN NULL;
    END IF;
    IF pg_catalog.length(p_traceparent) > 256
       OR p_traceparent COLLATE "C" !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?$' THEN
        RETURN 'traceparent must be version-traceid-parentid-flags in lower-case hex (W3C Trace Context)';
    END IF;
    IF pg_catalog.left(p_traceparent, 2) = 'ff' THEN
        RETURN 'traceparent version ff is invalid';
    END IF;
    IF pg_catalog.left(p_traceparent, 2) = '00' AND pg_catalog.length(p_traceparent) <> 55 THEN
        RETURN 'traceparent version 00 has exactly 55 characters';
    END IF;
    IF pg_catalog.substr(p_traceparent, 4, 32) = '00000000000000000000000000000000' THEN
        RETURN 'traceparent trace id is all zeros';
    END IF;
    IF pg_catalog.substr(p_traceparent, 37, 16) = '0000000000000000' THEN
        RETURN 'traceparent parent id is all zeros';
    END IF;
    IF p_tracestate IS NULL OR p_tracestate = '' THEN
        RETURN NULL;
    END IF;
    IF pg_catalog.length(p_tracestate) > 512 THEN
        RETURN 'tracestate is longer than 512 characters';
    END IF;
    FOREACH v_member IN ARRAY pg_catalog.string_to_array(p_tracestate, ',') LOOP
        v_member := pg_catalog.btrim(v_member, E' \t');
        CONTINUE WHEN v_member = '';
        v_count := v_count + 1;
        IF v_member COLLATE "C" !~ ('^([a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})'
                                    '=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$') THEN
            RETURN pg_catalog.format('tracestate member %s is not key=value (W3C Trace Context)', v_count);
        END IF;
    END LOOP;
    IF v_count > 32 THEN
        RETURN 'tracestate has more than 32 members';
    END IF;
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION outbox._trace_context_problem(text, text) IS
    'Private: NULL when a W3C traceparent/tracestate pair may be stored beside an event, else the defect (SPEC R-DP-7).';

REVOKE ALL ON FUNCTION outbox._trace_context_problem(text, text) FROM PUBLIC;

-- Event immutability (SPEC R-SEC-3, R-AK-4, §2): no column of an event ever changes (the event
-- row is written once; its publication lives in outbox.outbox_publications). An UPDATE that
-- changes a column, DELETE and TRUNCATE raise OB202 (retention is a later, audited procedure).
CREATE OR REPLACE FUNCTION outbox.tg_outbox_events__immutable()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (NEW.event_id, NEW.event_type, NEW.schema_version, NEW.delivery_set_version,
            NEW.delivery_set_definition_schema_version, NEW.delivery_set_definition_digest_algorithm_version,
            NEW.delivery_set_definition_digest, NEW.aggregate_id, NEW.aggregate_revision, NEW.tenant_kind,
            NEW.tenant_id, NEW.workspace_id, NEW.project_id, NEW.correlation_id, NEW.causation_id,
            NEW.operation_id, NEW.event_payload, NEW.event_envelope_digest_algorithm_version,
            NEW.event_envelope_sha256, NEW.occurred_at, NEW.created_at, NEW.event_envelope_canonical,
            NEW.traceparent, NEW.tracestate)
           IS DISTINCT FROM
           (OLD.event_id, OLD.event_type, OLD.schema_version, OLD.delivery_set_version,
            OLD.delivery_set_definition_schema_version, OLD.delivery_set_definition_digest_algorithm_version,
            OLD.delivery_set_definition_digest, OLD.aggregate_id, OLD.aggregate_revision, OLD.tenant_kind,
            OLD.tenant_id, OLD.workspace_id, OLD.project_id, OLD.correlation_id, OLD.causation_id,
            OLD.operation_id, OLD.event_payload, OLD.event_envelope_digest_algorithm_version,
            OLD.event_envelope_sha256, OLD.occurred_at, OLD.created_at, OLD.event_envelope_canonical,
            OLD.traceparent, OLD.tracestate) THEN
            RAISE EXCEPTION 'immutability violation: event columns never change'
                USING ERRCODE = 'OB202', DETAIL = format('event %s', OLD.event_id);
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.outbox_events is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'events are immutable; only the audited retention procedure may archive them';
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_outbox_events__immutable() FROM PUBLIC;

DROP FUNCTION outbox.append_event(json, text, text);
DROP FUNCTION outbox.append_events(json, text[], text[]);

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

-- outbox.append_event(event json, canonical_text text DEFAULT NULL, event_envelope_sha256 text DEFAULT NULL,
--                     traceparent text DEFAULT NULL, tracestate text DEFAULT NULL)
-- Purpose: append one EventEnvelope@1 inside the caller's business transaction (SPEC §3.2): the
--   envelope is validated (D-3, R-AP-7), the ACTIVE delivery-set quartet is frozen on it (R-AP-1,
--   R-AP-2), envelope and jcs-sha256-v1 digest stored (R-AP-3, D-2), one pending delivery per
--   mandatory member (R-AP-4), proved at COMMIT (R-AP-5). It is outbox.append_events with a
--   one-element array: every rule lives there and in outbox._append_validate.
-- Trace context (R-DP-7): an optional W3C traceparent/tracestate stored beside the event, never in
--   the digested envelope (see append_events); invalid -> 22023.
-- Idempotence: the same eventId with the same digest returns the stored row; another digest is OB105.
-- Raises: OB103 no active definition / pair not applicable / no mandatory member; OB105 envelope
--   invalid (also larger than kernel_settings max_payload_bytes, default 1 MiB); OB201 not
--   canonicalizable (on the hot path also a canonical text that is not exactly canonical).
-- Design notes (digest paths, limits): docs/contract.md#outboxappend_event
-- Caller: outbox_producer.
CREATE OR REPLACE FUNCTION outbox.append_event(p_event json, p_canonical_text text DEFAULT NULL::text, p_event_envelope_sha256 text DEFAULT NULL::text, p_traceparent text DEFAULT NULL::text, p_tracestate text DEFAULT NULL::text)
 RETURNS TABLE(event_id uuid, event_envelope_sha256 text, delivery_count integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY
    SELECT a.event_id, a.event_envelope_sha256, a.delivery_count
      FROM outbox.append_events(pg_catalog.json_build_array(p_event),
                                ARRAY[p_canonical_text], ARRAY[p_event_envelope_sha256],
                                p_traceparent, p_tracestate) AS a;
END
$function$;

COMMENT ON FUNCTION outbox.append_event(json, text, text, text, text) IS
    'Append an EventEnvelope@1 with its frozen delivery set and pending deliveries: append_events with one element (SPEC §3.2, D-2). Optional W3C trace context stored beside the event (R-DP-7). Raises OB103, OB105, OB201, 22023. Caller: outbox_producer.';

REVOKE ALL ON FUNCTION outbox.append_event(json, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_event(json, text, text, text, text) TO outbox_producer;

DROP FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text);

-- outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval)
-- RETURNS TABLE(destination, consumer_name, event_id, attempt_id, lease_token, lease_expires_at, ...,
--   event_envelope jsonb, event_envelope_sha256, event_envelope_canonical, traceparent, tracestate)
--   (public, SPEC R-CL-1, R-CL-2, R-CL-5, R-CL-6, R-CL-7, R-PV-2, §13; HP-1, HP-3)
-- Purpose: lease up to p_batch_size claimable deliveries (pending, available_at <= now) of the given
--   destinations to p_worker, in (available_at, created_at, event_id) order, after a bounded
--   recovery of expired leases; per-aggregate ordering and claim pauses respected; O(batch), never
--   O(backlog). event_envelope_canonical is the verified canonical text (send it as is, P-5).
-- traceparent/tracestate: the event's W3C trace context (R-DP-7), NULL when none.
-- Time: clock_timestamp() once per call. Run it in its own short transaction (R-CL-5).
-- SQLSTATEs: 22023 invalid_parameter_value for a worker that is not a literal, an empty/NULL or
--   unregistered destination, a batch size outside 1..1000, a lease outside 1 second..1 hour.
-- Design notes (steps, plans, locking): docs/performance-notes.md#outboxclaim_deliveries
-- Caller: outbox_dispatcher.
CREATE OR REPLACE FUNCTION outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval, p_envelope text DEFAULT 'jsonb'::text)
 RETURNS TABLE(destination text, consumer_name text, event_id uuid, attempt_id uuid, lease_token uuid, lease_expires_at timestamp with time zone, attempt_number integer, expected_receipt_type text, expected_receipt_schema_version integer, required_projection_name text, required_projection_version integer, event_envelope jsonb, event_envelope_digest_algorithm_version text, event_envelope_sha256 text, event_type text, event_schema_version text, event_envelope_canonical text, traceparent text, tracestate text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_now          timestamptz := pg_catalog.clock_timestamp();
    v_destinations text[];
    v_claimable    text[];
    v_bad          text;
    v_expired      boolean;
BEGIN
    IF p_worker IS NULL OR p_worker !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_worker) > 200 THEN
        RAISE EXCEPTION 'claim_deliveries: invalid worker'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('worker %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_worker);
    END IF;
    IF p_batch_size IS NULL OR p_batch_size < 1 OR p_batch_size > 1000 THEN
        RAISE EXCEPTION 'claim_deliveries: invalid batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('batch_size %s is outside 1..1000', p_batch_size);
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'claim_deliveries: invalid lease'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('lease %s is outside 1 second..1 hour', p_lease);
    END IF;
    IF p_envelope IS NULL OR p_envelope NOT IN ('jsonb', 'canonical') THEN
        RAISE EXCEPTION 'claim_deliveries: invalid envelope form'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('envelope %L must be jsonb or canonical', p_envelope);
    END IF;
    IF p_destinations IS NULL OR pg_catalog.cardinality(p_destinations) = 0 THEN
        RAISE EXCEPTION 'claim_deliveries: no destinations'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'destinations must be a non-empty array of registered destinations';
    END IF;
    -- one statement for the four look-ups before the claim: the first unknown destination, the
    -- distinct sorted list, the same list without paused destinations (R-PV-2: a primary-key
    -- probe of outbox.destination_claim_pauses per destination) and the lease-expiry probe (an
    -- index probe of the small leased index, outbox_deliveries_leased; its answer is used only
    -- when every destination is known)
    SELECT (SELECT coalesce(u.d, 'NULL')
              FROM pg_catalog.unnest(p_destinations) AS u(d)
             WHERE u.d IS NULL
                OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = u.d)
             LIMIT 1),
           (SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) FROM pg_catalog.unnest(p_destinations) AS u(d)),
           (SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) FROM pg_catalog.unnest(p_destinations) AS u(d)
             WHERE NOT EXISTS (SELECT 1 FROM outbox.destination_claim_pauses AS cp WHERE cp.destination = u.d)),
           -- (the destination test is a filter only - IS TRUE is not indexable - so the probe is
           -- always a range scan of the leased index, never a scan of the open-deliveries index by
           -- destination that a plan on unanalyzed tables may prefer: HP-3)
           EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS x
                    WHERE x.status = 'leased' AND x.lease_expires_at <= v_now
                      AND (x.destination = ANY (p_destinations)) IS TRUE)
      INTO v_bad, v_destinations, v_claimable, v_expired;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'claim_deliveries: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %s is not registered in outbox.delivery_destinations', v_bad);
    END IF;

    -- 1. bounded recovery of expired leases of these destinations (R-CL-2), only when one
    --    exists (R-SEC-5: a burst of wake-ups must not multiply the recovery work)
    IF v_expired THEN
        PERFORM outbox._dispatch_recover(v_destinations, p_batch_size, v_now);
    END IF;
    IF v_claimable IS NULL THEN
        RETURN; -- every destination is paused (R-PV-2)
    END IF;

    -- 2. claim (R-CL-1), one statement. Static SQL under plan_cache_mode = force_custom_plan
    -- (the function's SET clause, HP-3): parsed once per session, planned for the actual
    -- arguments on every call, so no generic plan made while the table was small or unanalyzed
    -- (LIMIT $n estimated at 10 % of the table, an index scanned by destination only) is ever
    -- reused. The statement is also shaped to stay O(batch) whatever the statistics say: the
    -- UPDATE finds the locked rows by ctid (TID scan; locked by this transaction, so their ctid
    -- cannot change), and the event of each claimed row is fetched by primary key in a
    -- LATERAL ... LIMIT 1 (never a hash join over the events table).
    RETURN QUERY
    WITH dest AS (
        SELECT dd.destination AS dest_name, dd.ordering AS dest_ordering
          FROM outbox.delivery_destinations AS dd
         WHERE dd.destination = ANY (v_claimable)
    ), picked AS (
        SELECT c.row_ctid
          FROM dest
         CROSS JOIN LATERAL (
                SELECT d.ctid AS row_ctid, d.available_at, d.created_at, d.event_id
                  FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = dest.dest_name
                   AND d.status = 'pending'
                   AND d.available_at <= v_now
                   AND (dest.dest_ordering = 'none'
                        OR NOT EXISTS (
                               SELECT 1
                                 FROM outbox.outbox_deliveries AS prior
                                WHERE prior.destination = d.destination
                                  AND prior.aggregate_id = d.aggregate_id
                                  AND prior.aggregate_revision < d.aggregate_revision
                                  AND prior.status IN ('pending', 'leased')))
                 ORDER BY d.available_at, d.created_at, d.event_id
                 LIMIT p_batch_size
                   FOR UPDATE OF d SKIP LOCKED
              ) AS c
         ORDER BY c.available_at, c.created_at, c.event_id
         LIMIT p_batch_size
    ), claimed AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status             = 'leased',
               lease_owner        = p_worker,
               lease_token        = pg_catalog.gen_random_uuid(),
               lease_expires_at   = v_now + p_lease,
               current_attempt_id = pg_catalog.gen_random_uuid(),
               attempt_count      = d.attempt_count + 1,
               last_attempt_at    = v_now
         WHERE d.ctid = ANY (ARRAY(SELECT picked.row_ctid FROM picked))
           -- true of every picked row (locked, so unchanged); written as one row comparison so
           -- it can only be a filter: the rows are found by ctid (a TID scan), never through the
           -- claimable index that a plan on small or unanalyzed tables might prefer (HP-3)
           AND (d.status, d.destination = ANY (v_claimable), d.available_at <= v_now)
               IS NOT DISTINCT FROM ('pending', true, true)
        RETURNING d.destination AS c_destination, d.event_id AS c_event_id, d.consumer_name AS c_consumer_name,
                  d.current_attempt_id AS c_attempt_id, d.lease_token AS c_lease_token,
                  d.lease_expires_at AS c_lease_expires_at, d.attempt_count AS c_attempt_count,
                  d.expected_receipt_type AS c_receipt_type, d.expected_receipt_schema_version AS c_receipt_version,
                  d.required_projection_name AS c_projection_name, d.required_projection_version AS c_projection_version,
                  d.available_at AS c_available_at, d.created_at AS c_created_at
    ), started AS (
        -- the immutable attempt starts, one set-based INSERT (HP-5); no foreign key check per
        -- row: each start is built from the delivery row this statement just updated
        -- (migration 019 dropped the start -> delivery foreign key, see its header)
        INSERT INTO outbox.outbox_delivery_attempt_starts
               (attempt_id, destination, event_id, attempt_number, lease_token, worker, started_at)
        SELECT c.c_attempt_id, c.c_destination, c.c_event_id, c.c_attempt_count, c.c_lease_token, p_worker, v_now
          FROM claimed AS c
    )
    SELECT c.c_destination, c.c_consumer_name, c.c_event_id, c.c_attempt_id, c.c_lease_token,
           c.c_lease_expires_at, c.c_attempt_count, c.c_receipt_type,
           c.c_receipt_version, c.c_projection_name,
           c.c_projection_version, ev.envelope,
           ev.event_envelope_digest_algorithm_version, ev.event_envelope_sha256,
           ev.event_type, ev.schema_version, ev.canonical, ev.traceparent, ev.tracestate
      FROM claimed AS c
     CROSS JOIN LATERAL (
            SELECT CASE WHEN e.event_envelope_canonical IS NULL THEN outbox._event_envelope(e)
                        WHEN p_envelope = 'canonical' THEN NULL
                        ELSE e.event_envelope_canonical::jsonb END AS envelope,
                   e.event_envelope_digest_algorithm_version,
                   e.event_envelope_sha256, e.event_type, e.schema_version,
                   e.event_envelope_canonical AS canonical, e.traceparent, e.tracestate
              FROM outbox.outbox_events AS e
             WHERE e.event_id = c.c_event_id
             LIMIT 1
          ) AS ev
     ORDER BY c.c_available_at, c.c_created_at, c.c_event_id;
END
$function$;

COMMENT ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) IS
    'Lease up to batch_size claimable deliveries (pending, available) of the destinations to worker, ordered by available_at, created_at, event_id; FOR UPDATE SKIP LOCKED; appends one attempt start per row; recovers expired leases of those destinations first. 22023 on invalid arguments. SPEC R-CL-1, R-CL-2, R-CL-6, R-CL-7.';

REVOKE ALL ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) TO outbox_dispatcher;

RESET ROLE;
