-- append_events (SPEC §13, R-AK-9, D-2): many envelopes in one call, set-based, with the one rule
-- set of append_event; append_event becomes append_events with a one-element array, and its hot
-- path refuses a canonical text that is not exactly canonical (OB201, as the slow path would).
SET LOCAL ROLE outbox_owner;

-- outbox._append_fail(p_sqlstate text, p_message text, p_detail text, p_hint text) RETURNS integer
-- Raise p_sqlstate (OB103, OB105 or OB201) with a message, detail and hint from inside a
-- set-based query of the append rules (outbox._append_validate, outbox.append_events): called in
-- a CASE branch for the first element that breaks a rule, it never returns (the integer result
-- type only lets it stand where an expression is expected). NULL detail/hint are left out.
-- Private helper; granted to nobody.
CREATE FUNCTION outbox._append_fail(p_sqlstate text, p_message text, p_detail text, p_hint text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION USING ERRCODE = p_sqlstate, MESSAGE = p_message,
        DETAIL = COALESCE(p_detail, ''), HINT = COALESCE(p_hint, '');
END
$fn$;

COMMENT ON FUNCTION outbox._append_fail(text, text, text, text) IS
    'Private: raise an append rule''s SQLSTATE from inside a set-based query (SPEC §3.2, R-AK-9).';
REVOKE ALL ON FUNCTION outbox._append_fail(text, text, text, text) FROM PUBLIC;

-- outbox._append_validate(p_event json, p_canonical_text text, p_event_envelope_sha256 text,
--                         p_max_bytes bigint, p_label text)
--   RETURNS record (event_id, event_type, ..., event_envelope_sha256, event_envelope_canonical)
-- Purpose: THE envelope and digest rules of an append (SPEC §3.2, D-2, D-3, R-AP-3, R-AP-7), in
--   one place: outbox.append_events calls it for every element of its array inside its
--   set-based statement, and outbox.append_event is append_events with one element. Returns the
--   validated columns of one EventEnvelope@1, its jcs-sha256-v1 digest and the canonical text the
--   database verified (hot path) or computed (slow path), or raises.
-- Rules, in this order: canonical text and digest go together; the event is an object; on the
--   hot path eventId and occurredAt are present (on the slow path missing ones are generated: a
--   new UUID, clock_timestamp() in UTC); exactly the EventEnvelope@1 fields, with their types and
--   literal rules (D-3, D-4); tenant; occurredAt UTC RFC 3339 with six fractional digits and a
--   real time; payload an object; the event's JSON text at most p_max_bytes
--   (kernel_settings max_payload_bytes); the pair's refinements (R-AP-7); then the digest (D-2):
--   slow path — the database canonicalizes the event (OB201 when it cannot: duplicate key,
--     non-integer or unsafe number, nesting deeper than 64);
--   hot path — the digest is 64 lower-case hex digits and sha256(canonical text); unless the
--     event's JSON text is the canonical text itself (what the producer library sends), the text
--     parses to the event; the text is exactly the RFC 8785 canonical form of a document the slow
--     path accepts (outbox._jcs_text_problem: cheap checks — OB201 otherwise, so the hot path
--     accepts exactly what the slow path accepts); and a different event text must canonicalize
--     to it (so a duplicate key in the event is OB201 on both paths).
-- p_label prefixes every detail (append_events passes 'events[i]: ', append_event '').
-- Raises: OB105 envelope invalid (also a canonical text that is not JSON or not this envelope);
--   OB201 not canonicalizable; 22P05 from PostgreSQL for a \u0000 escape in the event (no jsonb
--   can hold it), exactly as append_event always did.
-- Locking: none; reads outbox.envelope_refinements.
-- Caller: outbox.append_events (SECURITY DEFINER, as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._append_validate(
    p_event json,
    p_canonical_text text,
    p_event_envelope_sha256 text,
    p_max_bytes bigint,
    p_label text,
    OUT event_id uuid, OUT event_type text, OUT schema_version text, OUT aggregate_id text,
    OUT aggregate_revision bigint, OUT tenant_kind text, OUT tenant_id text, OUT workspace_id text,
    OUT project_id text, OUT correlation_id text, OUT causation_id text, OUT operation_id text,
    OUT event_payload jsonb, OUT occurred_at timestamptz, OUT event_envelope_sha256 text,
    OUT event_envelope_canonical text
) RETURNS record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c_literal constant text := '^[a-z0-9][a-z0-9._@-]*$';
    v_env       jsonb;
    v_key       text;
    v_tenant    jsonb;
    v_generated boolean := false;
    v_problem   text;
    v_hint      text;
BEGIN
    IF p_event IS NULL THEN
        PERFORM outbox._envelope_fail(p_label || 'event is NULL');
    END IF;
    IF (p_canonical_text IS NULL) <> (p_event_envelope_sha256 IS NULL) THEN
        PERFORM outbox._envelope_fail(p_label || 'canonical_text and event_envelope_sha256 go together: pass both or neither');
    END IF;
    v_env := p_event::jsonb;
    IF jsonb_typeof(v_env) <> 'object' THEN
        PERFORM outbox._envelope_fail(p_label || 'event must be a JSON object');
    END IF;

    -- Generated identity and time (not on the hot path: the digest must cover them).
    IF NOT v_env ? 'eventId' THEN
        IF p_canonical_text IS NOT NULL THEN
            PERFORM outbox._envelope_fail(p_label || 'eventId is required when canonical_text is passed');
        END IF;
        v_env := v_env || jsonb_build_object('eventId', gen_random_uuid()::text);
        v_generated := true;
    END IF;
    IF NOT v_env ? 'occurredAt' THEN
        IF p_canonical_text IS NOT NULL THEN
            PERFORM outbox._envelope_fail(p_label || 'occurredAt is required when canonical_text is passed');
        END IF;
        v_env := v_env || jsonb_build_object('occurredAt',
                     to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
        v_generated := true;
    END IF;

    -- Structure (D-3): exactly the EventEnvelope@1 fields, the right types, no nulls.
    SELECT k INTO v_key FROM jsonb_object_keys(v_env) k
    WHERE k NOT IN ('eventId', 'eventType', 'eventSchemaVersion', 'aggregateId', 'aggregateRevision',
                    'tenant', 'correlationId', 'causationId', 'operationId', 'occurredAt', 'payload')
    LIMIT 1;
    IF v_key IS NOT NULL THEN
        PERFORM outbox._envelope_fail(p_label || format('unknown field %s', v_key));
    END IF;
    IF jsonb_typeof(v_env -> 'eventId') IS DISTINCT FROM 'string'
       OR (v_env ->> 'eventId') !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        PERFORM outbox._envelope_fail(p_label || 'eventId must be a lower-case canonical UUID string');
    END IF;
    IF jsonb_typeof(v_env -> 'eventType') IS DISTINCT FROM 'string' OR (v_env ->> 'eventType') !~ c_literal
       OR jsonb_typeof(v_env -> 'eventSchemaVersion') IS DISTINCT FROM 'string'
       OR (v_env ->> 'eventSchemaVersion') !~ c_literal THEN
        PERFORM outbox._envelope_fail(p_label || 'eventType and eventSchemaVersion must be strings matching ^[a-z0-9][a-z0-9._@-]*$');
    END IF;
    IF jsonb_typeof(v_env -> 'aggregateId') IS DISTINCT FROM 'string'
       OR length(v_env ->> 'aggregateId') NOT BETWEEN 1 AND 200 THEN
        PERFORM outbox._envelope_fail(p_label || 'aggregateId must be a string of 1..200 characters');
    END IF;
    aggregate_revision := outbox._json_int(v_env -> 'aggregateRevision');
    IF aggregate_revision IS NULL OR aggregate_revision < 1 THEN
        PERFORM outbox._envelope_fail(p_label || 'aggregateRevision must be an integer > 0 (and <= 2^53-1)');
    END IF;
    v_tenant := v_env -> 'tenant';
    IF jsonb_typeof(v_tenant) IS DISTINCT FROM 'object' THEN
        PERFORM outbox._envelope_fail(p_label || 'tenant must be an object');
    END IF;
    SELECT CASE WHEN t.k NOT IN ('tenantKind', 'tenantId', 'workspaceId', 'projectId')
                THEN format('unknown field tenant.%s', t.k)
                ELSE format('tenant.%s must be a string of 1..200 characters', t.k) END
      INTO v_key
      FROM jsonb_each(v_tenant) AS t(k, v)
     WHERE t.k NOT IN ('tenantKind', 'tenantId', 'workspaceId', 'projectId')
        OR jsonb_typeof(t.v) <> 'string' OR length(t.v #>> '{}') NOT BETWEEN 1 AND 200
     LIMIT 1;
    IF v_key IS NOT NULL THEN
        PERFORM outbox._envelope_fail(p_label || v_key);
    END IF;
    IF NOT (v_tenant ?& ARRAY['tenantKind', 'tenantId', 'workspaceId']) THEN
        PERFORM outbox._envelope_fail(p_label || 'tenant must carry tenantKind, tenantId and workspaceId');
    END IF;
    FOREACH v_key IN ARRAY ARRAY['correlationId', 'causationId', 'operationId'] LOOP
        IF v_env ? v_key AND (jsonb_typeof(v_env -> v_key) <> 'string'
                              OR length(v_env ->> v_key) NOT BETWEEN 1 AND 200) THEN
            PERFORM outbox._envelope_fail(p_label || format('%s, when present, must be a string of 1..200 characters (absent fields are omitted, never null)', v_key));
        END IF;
    END LOOP;
    IF jsonb_typeof(v_env -> 'occurredAt') IS DISTINCT FROM 'string'
       OR (v_env ->> 'occurredAt') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN
        PERFORM outbox._envelope_fail(p_label || 'occurredAt must be UTC RFC 3339 with exactly six fractional digits and Z');
    END IF;
    BEGIN
        occurred_at := (v_env ->> 'occurredAt')::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        PERFORM outbox._envelope_fail(p_label || 'occurredAt is not a valid time');
    END;
    IF to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') <> (v_env ->> 'occurredAt') THEN
        PERFORM outbox._envelope_fail(p_label || 'occurredAt is not a valid time');
    END IF;
    event_payload := v_env -> 'payload';
    IF jsonb_typeof(event_payload) IS DISTINCT FROM 'object' THEN
        PERFORM outbox._envelope_fail(p_label || 'payload must be a JSON object');
    END IF;
    IF octet_length(p_event::text) > p_max_bytes THEN
        PERFORM outbox._envelope_fail(p_label || format('event larger than max_payload_bytes (%s bytes, outbox.kernel_settings)', p_max_bytes));
    END IF;

    -- Per-pair refinements (R-AP-7).
    SELECT string_agg(r.required_field, ', ' ORDER BY r.required_field) INTO v_key
    FROM outbox.envelope_refinements r
    WHERE r.event_type = v_env ->> 'eventType' AND r.event_schema_version = v_env ->> 'eventSchemaVersion'
      AND NOT (CASE WHEN r.required_field = 'projectId' THEN v_tenant ? 'projectId' ELSE v_env ? r.required_field END);
    IF v_key IS NOT NULL THEN
        PERFORM outbox._envelope_fail(p_label || format('%s@%s requires %s', v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_key));
    END IF;

    -- Digest (R-AP-3, D-2).
    IF p_canonical_text IS NULL THEN
        BEGIN
            IF v_generated THEN
                -- jsonb dropped duplicate keys: the caller's document must canonicalize as well.
                PERFORM outbox.jcs_canonicalize(p_event);
                event_envelope_canonical := outbox.jcs_canonicalize(v_env::json);
            ELSE
                event_envelope_canonical := outbox.jcs_canonicalize(p_event);
            END IF;
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            -- the canonicalizer's own error, naming the element
            GET STACKED DIAGNOSTICS v_key = MESSAGE_TEXT, v_problem = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
            RAISE EXCEPTION '%', v_key USING ERRCODE = 'OB201', DETAIL = p_label || v_problem, HINT = v_hint;
        END;
        event_envelope_sha256 := outbox._sha256_hex(event_envelope_canonical);
    ELSE
        IF p_event_envelope_sha256 !~ '^[0-9a-f]{64}$' THEN
            PERFORM outbox._envelope_fail(p_label || 'event_envelope_sha256 must be 64 lower-case hex digits');
        END IF;
        IF outbox._sha256_hex(p_canonical_text) <> p_event_envelope_sha256 THEN
            PERFORM outbox._envelope_fail(p_label || 'caller digest differs from sha256 of canonical_text');
        END IF;
        IF p_event::text <> p_canonical_text THEN
            BEGIN
                IF p_canonical_text::jsonb <> v_env THEN
                    PERFORM outbox._envelope_fail(p_label || 'canonical_text does not parse to the submitted envelope');
                END IF;
            EXCEPTION WHEN invalid_text_representation THEN
                PERFORM outbox._envelope_fail(p_label || 'canonical_text is not JSON');
            END;
        END IF;
        -- The hot path accepts exactly what the slow path accepts (D-2).
        v_problem := outbox._jcs_text_problem(p_canonical_text);
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'canonical_text is not the RFC 8785 canonical form of a jcs-sha256-v1 document'
                USING ERRCODE = 'OB201', DETAIL = p_label || v_problem;
        END IF;
        IF p_event::text <> p_canonical_text THEN
            -- the event's own text must canonicalize (a duplicate key hides in its jsonb)
            BEGIN
                v_problem := outbox.jcs_canonicalize(p_event);
            EXCEPTION WHEN SQLSTATE 'OB201' THEN
                GET STACKED DIAGNOSTICS v_key = MESSAGE_TEXT, v_problem = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
                RAISE EXCEPTION '%', v_key USING ERRCODE = 'OB201', DETAIL = p_label || v_problem, HINT = v_hint;
            END;
            IF v_problem <> p_canonical_text THEN
                PERFORM outbox._envelope_fail(p_label || 'canonical_text is not the canonical form of the submitted envelope');
            END IF;
        END IF;
        event_envelope_sha256 := p_event_envelope_sha256;
        event_envelope_canonical := p_canonical_text;
    END IF;

    event_id := (v_env ->> 'eventId')::uuid;
    event_type := v_env ->> 'eventType';
    schema_version := v_env ->> 'eventSchemaVersion';
    aggregate_id := v_env ->> 'aggregateId';
    tenant_kind := v_tenant ->> 'tenantKind';
    tenant_id := v_tenant ->> 'tenantId';
    workspace_id := v_tenant ->> 'workspaceId';
    project_id := v_tenant ->> 'projectId';
    correlation_id := v_env ->> 'correlationId';
    causation_id := v_env ->> 'causationId';
    operation_id := v_env ->> 'operationId';
END
$fn$;

COMMENT ON FUNCTION outbox._append_validate(json, text, text, bigint, text) IS
    'Private: the envelope and digest rules of an append (SPEC §3.2, D-2, D-3): the validated columns of one EventEnvelope@1, or OB105/OB201.';
REVOKE ALL ON FUNCTION outbox._append_validate(json, text, text, bigint, text) FROM PUBLIC;

-- outbox.append_events(events json, canonical_texts text[] DEFAULT NULL,
--                      event_envelope_sha256s text[] DEFAULT NULL)
--   RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count int)
-- Purpose: append many EventEnvelope@1 objects (a JSON array) inside the caller's business
--   transaction, with exactly the rules of outbox.append_event (SPEC §3.2, §13, R-AK-9) — which
--   is this function called with a one-element array: there is one copy of every rule.
--   Envelope and digest rules (D-2, D-3, R-AP-3, R-AP-7): outbox._append_validate. Then, per
--   element in input order: an ACTIVE delivery-set definition exists and the pair is applicable
--   under it (R-AP-1); its quartet is frozen on the event (R-AP-2); an eventId that already
--   exists with the same digest is an idempotent re-append (nothing is written, its row comes
--   back), with another digest OB105; the same eventId twice in one call with different digests
--   is OB105 (with the same digest it is appended once); a new event's pair has at least one
--   mandatory member. Set-based: one INSERT … SELECT for the events and one for their pending
--   deliveries (one per mandatory member, R-AP-4); channel outbox_delivery is notified once per
--   destination per call (delivered on COMMIT). The deferred constraint triggers prove every
--   event's delivery set at COMMIT (R-AP-5).
-- Digest paths (D-2): canonical_texts and event_envelope_sha256s, when given, are parallel to
--   events (index 1 = first element); an element with both NULL is canonicalized by the
--   database. The database never stores a digest it did not verify.
-- Returns: one row per element, in input order: the event id, its digest, and its number of
--   deliveries (for an idempotent re-append, the deliveries it already has).
-- Raises (any invalid element fails the whole call; the caller's transaction decides):
--   OB103 no active definition / pair not applicable / no mandatory member; OB105 envelope
--   invalid (missing/unknown field, wrong type, refinement, size, caller digest differs, eventId
--   reused with other content); OB201 not canonicalizable (also a canonical text that is not
--   exactly the canonical form of an acceptable document). The first element (input order) that
--   breaks an envelope or digest rule raises, then the first that breaks a definition rule.
-- Locking: row locks of the inserted events/deliveries only; a concurrent append of the same
--   new eventId waits for this transaction and then fails on the primary key.
-- Caller: outbox_producer.
CREATE FUNCTION outbox.append_events(
    p_events json,
    p_canonical_texts text[] DEFAULT NULL,
    p_event_envelope_sha256s text[] DEFAULT NULL
) RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_count     integer;
    v_max_bytes bigint;
BEGIN
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
    WITH v AS MATERIALIZED (
        -- The envelope and digest rules, element by element in input order (the first break raises).
        SELECT e.ord, (e.r).*
          FROM (SELECT a.ord::integer AS ord,
                       outbox._append_validate(a.raw, p_canonical_texts[a.ord::integer],
                                               p_event_envelope_sha256s[a.ord::integer], v_max_bytes,
                                               CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', a.ord - 1)
                                                    ELSE '' END) AS r
                  FROM pg_catalog.json_array_elements(p_events) WITH ORDINALITY AS a(raw, ord)
                OFFSET 0) AS e
    ), c AS MATERIALIZED (
        -- (scalar subqueries, not joins: one primary-key lookup per element whatever the
        -- planner believes about the tables' sizes when the plan is cached)
        SELECT v.*, a.delivery_set_version, a.definition_schema_version, a.digest_algorithm_version,
               a.definition_digest,
               (SELECT x.event_envelope_sha256 FROM outbox.outbox_events x WHERE x.event_id = v.event_id) AS existing_sha256,
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
    ), inserted_events AS (
        INSERT INTO outbox.outbox_events
            (event_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
             delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
             aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id,
             correlation_id, causation_id, operation_id, event_payload,
             event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, event_envelope_canonical)
        SELECT f.event_id, f.event_type, f.schema_version, f.delivery_set_version, f.definition_schema_version,
               f.digest_algorithm_version, f.definition_digest,
               f.aggregate_id, f.aggregate_revision, f.tenant_kind, f.tenant_id, f.workspace_id, f.project_id,
               f.correlation_id, f.causation_id, f.operation_id, f.event_payload,
               'jcs-sha256-v1', f.event_envelope_sha256, f.occurred_at, f.event_envelope_canonical
          FROM fresh f
        RETURNING outbox_events.event_id
    ), inserted_deliveries AS (
        -- one pending delivery per mandatory member (R-AP-4, R-AP-6)
        INSERT INTO outbox.outbox_deliveries
            (destination, event_id, delivery_set_version, consumer_name, expected_receipt_type,
             expected_receipt_schema_version, required_projection_name, required_projection_version,
             mandatory, aggregate_id, aggregate_revision)
        SELECT m.destination, f.event_id, m.delivery_set_version, m.consumer_name, m.expected_receipt_type,
               m.expected_receipt_schema_version, m.projection_name, m.projection_version,
               true, f.aggregate_id, f.aggregate_revision
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
$fn$;

COMMENT ON FUNCTION outbox.append_events(json, text[], text[]) IS
    'Append many EventEnvelope@1 objects (a JSON array) with the rules of append_event, set-based; rows in input order (SPEC §3.2, §13, R-AK-9, D-2). Raises OB103, OB105, OB201. Caller: outbox_producer.';
REVOKE ALL ON FUNCTION outbox.append_events(json, text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_events(json, text[], text[]) TO outbox_producer;


-- append_event's body changed (docs/migrations.md rule 2): re-created from its file.
DROP FUNCTION outbox.append_event(json, text, text);
-- outbox.append_event(event json, canonical_text text DEFAULT NULL, event_envelope_sha256 text DEFAULT NULL)
-- Purpose: append one EventEnvelope@1 inside the caller's business transaction (SPEC §3.2): the
--   envelope is validated (D-3, R-AP-7, payload size limit), the ACTIVE delivery-set definition's
--   quartet is frozen on the event (R-AP-1, R-AP-2), the envelope and its jcs-sha256-v1 digest
--   are stored with the canonical text (R-AP-3, D-2), one pending delivery per mandatory member
--   is created (R-AP-4) and channel outbox_delivery is notified once per destination (delivered
--   on COMMIT). The deferred constraint triggers prove the delivery set at COMMIT (R-AP-5).
--   eventId and occurredAt may be omitted (generated) unless the canonical text is passed.
-- One rule set: this is outbox.append_events called with a one-element array; every check lives
--   there and in outbox._append_validate (see their headers for the full list and order).
-- Digest paths (D-2): without canonical_text the database canonicalizes the envelope itself;
--   with canonical_text and its digest (the producer library's hot path) the database checks
--   sha256(canonical_text) = digest, that the text is exactly the RFC 8785 form of a document the
--   slow path accepts (cheap checks, outbox._jcs_text_problem), and that it is the submitted
--   envelope; the full canonical re-check also runs in outbox.verify_event_digests(). Either way
--   the database never stores a digest it did not verify.
-- Idempotence: the same eventId appended again with the same digest returns the stored row
--   (nothing new is written); the same eventId with another digest is refused (OB105).
-- Limits: an event document larger than outbox.kernel_settings max_payload_bytes (default 1 MiB,
--   changed by the owner only) -> OB105.
-- Raises: OB103 no active definition / pair not applicable / no mandatory member;
--   OB105 envelope invalid (missing/unknown field, wrong type, refinement, size, caller digest
--   differs); OB201 not canonicalizable (duplicate key, unsafe number, nesting; on the hot path
--   also a canonical text that is not exactly canonical: whitespace, escapes, number forms,
--   member order).
-- Caller: outbox_producer.
CREATE FUNCTION outbox.append_event(
    p_event json,
    p_canonical_text text DEFAULT NULL,
    p_event_envelope_sha256 text DEFAULT NULL
) RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT a.event_id, a.event_envelope_sha256, a.delivery_count
      FROM outbox.append_events(pg_catalog.json_build_array(p_event),
                                ARRAY[p_canonical_text], ARRAY[p_event_envelope_sha256]) AS a;
END
$fn$;

COMMENT ON FUNCTION outbox.append_event(json, text, text) IS
    'Append an EventEnvelope@1 with its frozen delivery set and pending deliveries: append_events with one element (SPEC §3.2, D-2). Raises OB103, OB105, OB201. Caller: outbox_producer.';
REVOKE ALL ON FUNCTION outbox.append_event(json, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_event(json, text, text) TO outbox_producer;


RESET ROLE;
