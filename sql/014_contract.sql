-- The contract an outsider can build on (issue 12; SPEC R-AK-6, R-AK-7, R-AP-7):
--   * outbox.quarantine_delivery gains an optional trailing p_error_ref text DEFAULT NULL: the
--     consumer's reference for a 409/422 rejection is kept (sanitized) on the attempt finish and
--     the delivery, as outbox.quarantine_deliveries already did for its errorRef item member.
--     The six-argument signature is dropped (docs/migrations.md rule 2); the grant moves to the
--     seven-argument function, nothing for PUBLIC.
--   * outbox._append_validate: the OB105 detail of a refinement names the pair as
--     "run.created@2.0 (schema 2.0)" instead of "run.created@2.0@2.0".
-- Both run in one transaction (tern). No table changes; nothing to stop.
SET LOCAL ROLE outbox_owner;

DROP FUNCTION IF EXISTS outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text);
DROP FUNCTION IF EXISTS outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text, text);
-- outbox.quarantine_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
--                            p_lease_token uuid, p_reason text, p_error_code text,
--                            p_error_ref text DEFAULT NULL) RETURNS void
-- (public, SPEC R-AK-6, R-AK-7, R-AK-9, §13)
-- Purpose: record one non-retryable outcome - a batch of one of outbox.quarantine_deliveries
--   (same fencing, same reason/code rule, same quarantine write): non_retryable finish, terminal
--   quarantined, quarantine row with the event digest. p_error_ref (optional) is the consumer's
--   reference for the rejection (e.g. the "ref" of a 409/422 answer, already filtered by the
--   dispatcher); it is sanitized by outbox._dispatch_sanitize_ref (control characters become
--   spaces, whitespace collapsed, trimmed, cut to 200 characters, empty -> NULL) and kept as
--   sanitized_error_ref on the attempt finish and last_error_ref on the delivery.
-- SQLSTATEs: 22023 reason not a non-retryable code / unknown error code; OB001 fencing rejected.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.quarantine_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                           p_lease_token uuid, p_reason text, p_error_code text,
                                           p_error_ref text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_r record;
BEGIN
    SELECT r.outcome, r.sqlstate, r.detail INTO v_r
      FROM outbox.quarantine_deliveries(pg_catalog.json_build_array(pg_catalog.json_build_object(
               'destination', p_destination, 'eventId', p_event_id, 'attemptId', p_attempt_id,
               'leaseToken', p_lease_token, 'reason', p_reason, 'errorCode', p_error_code,
               'errorRef', p_error_ref))) AS r;
    PERFORM outbox._raise_item('quarantine_delivery', v_r.sqlstate, v_r.detail);
END
$fn$;

COMMENT ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text, text) IS
    'Quarantine a fenced live lease (a batch of one of quarantine_deliveries): non_retryable finish (with the sanitized error ref), terminal state, quarantine row with the event digest. 22023 bad reason/code, OB001 fencing. SPEC R-AK-6, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text, text) TO outbox_dispatcher;


DROP FUNCTION outbox._append_validate(json, text, text, bigint, text);
-- outbox._append_validate(p_event json, p_canonical_text text, p_event_envelope_sha256 text,
--                         p_max_bytes bigint, p_label text)
--   RETURNS record (event_id, event_type, ..., event_envelope_sha256, event_envelope_canonical)
--   (private, SPEC §3.2, D-2, D-3, R-AP-3, R-AP-7)
-- Purpose: THE envelope and digest rules of an append, in one place: returns the validated columns
--   of one EventEnvelope@1, its jcs-sha256-v1 digest and the canonical text the database verified
--   (hot path) or computed (slow path), or raises. p_label prefixes every detail.
-- Raises: OB105 envelope invalid; OB201 not canonicalizable; 22P05 from PostgreSQL for a \u0000
--   escape in the event.
-- Locking: none; reads outbox.envelope_refinements.
-- Design notes (the rules in order, both digest paths): docs/contract.md#outbox_append_validate
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
        PERFORM outbox._envelope_fail(p_label || format('%s (schema %s) requires %s', v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_key));
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


RESET ROLE;
