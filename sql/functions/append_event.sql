-- outbox.append_event(event json, canonical_text text DEFAULT NULL, event_envelope_sha256 text DEFAULT NULL)
-- Purpose: append one EventEnvelope@1 inside the caller's business transaction (SPEC §3.2):
--   validate the envelope (D-3, R-AP-7 refinements, payload size limit), read the ACTIVE
--   delivery-set definition and freeze its quartet on the event (R-AP-1, R-AP-2), store the
--   envelope and its jcs-sha256-v1 digest (R-AP-3), create exactly one pending delivery per
--   mandatory member (R-AP-4) and notify channel outbox_delivery once per destination (delivered
--   on COMMIT). The deferred constraint triggers prove the delivery set at COMMIT (R-AP-5).
--   eventId and occurredAt may be omitted (generated) unless the canonical text is passed.
-- Digest paths (D-2): without canonical_text the database canonicalizes the envelope itself;
--   with canonical_text and its digest (the producer library's hot path) the database checks
--   sha256(canonical_text) = digest and that the text parses to exactly the submitted envelope;
--   the full canonical re-check runs in outbox.verify_event_digests(). Either way the database
--   never stores a digest it did not verify.
-- Idempotence: the same eventId appended again with the same digest returns the stored row
--   (nothing new is written); the same eventId with another digest is refused (OB105).
-- Limits: an event document larger than outbox.kernel_settings max_payload_bytes (default 1 MiB,
--   changed by the owner only) -> OB105.
-- Raises: OB103 no active definition / pair not applicable / no mandatory member;
--   OB105 envelope invalid (missing/unknown field, wrong type, refinement, size, caller digest
--   differs); OB201 not canonicalizable (duplicate key, unsafe number).
-- Caller: outbox_producer.
CREATE FUNCTION outbox.append_event(
    p_event json,
    p_canonical_text text DEFAULT NULL,
    p_event_envelope_sha256 text DEFAULT NULL
) RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    c_literal constant text := '^[a-z0-9][a-z0-9._@-]*$';
    v_env       jsonb;
    v_canonical text;
    v_key       text;
    v_tenant    jsonb;
    v_payload   jsonb;
    v_event_id  uuid;
    v_occurred  timestamptz;
    v_revision  bigint;
    v_digest    text;
    v_max_bytes bigint;
    v_active    outbox.delivery_set_versions%ROWTYPE;
    v_count     integer;
    v_existing  text;
    v_generated boolean := false;
BEGIN
    IF p_event IS NULL THEN
        PERFORM outbox._envelope_fail('event is NULL');
    END IF;
    IF (p_canonical_text IS NULL) <> (p_event_envelope_sha256 IS NULL) THEN
        PERFORM outbox._envelope_fail('canonical_text and event_envelope_sha256 go together: pass both or neither');
    END IF;
    v_env := p_event::jsonb;
    IF jsonb_typeof(v_env) <> 'object' THEN
        PERFORM outbox._envelope_fail('event must be a JSON object');
    END IF;

    -- Generated identity and time (not on the hot path: the digest must cover them).
    IF NOT v_env ? 'eventId' THEN
        IF p_canonical_text IS NOT NULL THEN
            PERFORM outbox._envelope_fail('eventId is required when canonical_text is passed');
        END IF;
        v_env := v_env || jsonb_build_object('eventId', gen_random_uuid()::text);
        v_generated := true;
    END IF;
    IF NOT v_env ? 'occurredAt' THEN
        IF p_canonical_text IS NOT NULL THEN
            PERFORM outbox._envelope_fail('occurredAt is required when canonical_text is passed');
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
        PERFORM outbox._envelope_fail(format('unknown field %s', v_key));
    END IF;
    IF jsonb_typeof(v_env -> 'eventId') IS DISTINCT FROM 'string'
       OR (v_env ->> 'eventId') !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        PERFORM outbox._envelope_fail('eventId must be a lower-case canonical UUID string');
    END IF;
    IF jsonb_typeof(v_env -> 'eventType') IS DISTINCT FROM 'string' OR (v_env ->> 'eventType') !~ c_literal
       OR jsonb_typeof(v_env -> 'eventSchemaVersion') IS DISTINCT FROM 'string'
       OR (v_env ->> 'eventSchemaVersion') !~ c_literal THEN
        PERFORM outbox._envelope_fail('eventType and eventSchemaVersion must be strings matching ^[a-z0-9][a-z0-9._@-]*$');
    END IF;
    IF jsonb_typeof(v_env -> 'aggregateId') IS DISTINCT FROM 'string'
       OR length(v_env ->> 'aggregateId') NOT BETWEEN 1 AND 200 THEN
        PERFORM outbox._envelope_fail('aggregateId must be a string of 1..200 characters');
    END IF;
    v_revision := outbox._json_int(v_env -> 'aggregateRevision');
    IF v_revision IS NULL OR v_revision < 1 THEN
        PERFORM outbox._envelope_fail('aggregateRevision must be an integer > 0 (and <= 2^53-1)');
    END IF;
    v_tenant := v_env -> 'tenant';
    IF jsonb_typeof(v_tenant) IS DISTINCT FROM 'object' THEN
        PERFORM outbox._envelope_fail('tenant must be an object');
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
        PERFORM outbox._envelope_fail(v_key);
    END IF;
    IF NOT (v_tenant ?& ARRAY['tenantKind', 'tenantId', 'workspaceId']) THEN
        PERFORM outbox._envelope_fail('tenant must carry tenantKind, tenantId and workspaceId');
    END IF;
    FOREACH v_key IN ARRAY ARRAY['correlationId', 'causationId', 'operationId'] LOOP
        IF v_env ? v_key AND (jsonb_typeof(v_env -> v_key) <> 'string'
                              OR length(v_env ->> v_key) NOT BETWEEN 1 AND 200) THEN
            PERFORM outbox._envelope_fail(format('%s, when present, must be a string of 1..200 characters (absent fields are omitted, never null)', v_key));
        END IF;
    END LOOP;
    IF jsonb_typeof(v_env -> 'occurredAt') IS DISTINCT FROM 'string'
       OR (v_env ->> 'occurredAt') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN
        PERFORM outbox._envelope_fail('occurredAt must be UTC RFC 3339 with exactly six fractional digits and Z');
    END IF;
    BEGIN
        v_occurred := (v_env ->> 'occurredAt')::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        PERFORM outbox._envelope_fail('occurredAt is not a valid time');
    END;
    IF to_char(v_occurred AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') <> (v_env ->> 'occurredAt') THEN
        PERFORM outbox._envelope_fail('occurredAt is not a valid time');
    END IF;
    v_payload := v_env -> 'payload';
    IF jsonb_typeof(v_payload) IS DISTINCT FROM 'object' THEN
        PERFORM outbox._envelope_fail('payload must be a JSON object');
    END IF;
    SELECT k.value INTO v_max_bytes FROM outbox.kernel_settings k WHERE k.name = 'max_payload_bytes';
    IF octet_length(p_event::text) > v_max_bytes THEN
        PERFORM outbox._envelope_fail(format('event larger than max_payload_bytes (%s bytes, outbox.kernel_settings)', v_max_bytes));
    END IF;

    -- Per-pair refinements (R-AP-7).
    SELECT string_agg(r.required_field, ', ' ORDER BY r.required_field) INTO v_key
    FROM outbox.envelope_refinements r
    WHERE r.event_type = v_env ->> 'eventType' AND r.event_schema_version = v_env ->> 'eventSchemaVersion'
      AND NOT (CASE WHEN r.required_field = 'projectId' THEN v_tenant ? 'projectId' ELSE v_env ? r.required_field END);
    IF v_key IS NOT NULL THEN
        PERFORM outbox._envelope_fail(format('%s@%s requires %s', v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_key));
    END IF;

    -- Digest (R-AP-3, D-2).
    IF p_canonical_text IS NULL THEN
        IF v_generated THEN
            -- jsonb dropped duplicate keys: the caller's document must canonicalize as well.
            PERFORM outbox.jcs_canonicalize(p_event);
            v_canonical := outbox.jcs_canonicalize(v_env::json);
        ELSE
            v_canonical := outbox.jcs_canonicalize(p_event);
        END IF;
        v_digest := outbox._sha256_hex(v_canonical);
    ELSE
        IF p_event_envelope_sha256 !~ '^[0-9a-f]{64}$' THEN
            PERFORM outbox._envelope_fail('event_envelope_sha256 must be 64 lower-case hex digits');
        END IF;
        IF outbox._sha256_hex(p_canonical_text) <> p_event_envelope_sha256 THEN
            PERFORM outbox._envelope_fail('caller digest differs from sha256 of canonical_text');
        END IF;
        BEGIN
            IF p_canonical_text::jsonb <> v_env THEN
                PERFORM outbox._envelope_fail('canonical_text does not parse to the submitted envelope');
            END IF;
        EXCEPTION WHEN invalid_text_representation THEN
            PERFORM outbox._envelope_fail('canonical_text is not JSON');
        END;
        v_digest := p_event_envelope_sha256;
        v_canonical := p_canonical_text;
    END IF;
    v_event_id := (v_env ->> 'eventId')::uuid;

    -- Active definition and applicability (R-AP-1, R-AP-2).
    SELECT * INTO v_active FROM outbox.delivery_set_versions WHERE status = 'active';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no active delivery-set definition' USING ERRCODE = 'OB103',
            HINT = 'register and activate a delivery set (outboxctl release register / activate)';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM outbox.delivery_set_applicable_events a
                   WHERE a.delivery_set_version = v_active.delivery_set_version
                     AND a.event_type = v_env ->> 'eventType'
                     AND a.event_schema_version = v_env ->> 'eventSchemaVersion') THEN
        RAISE EXCEPTION 'event pair not applicable under the active delivery set' USING ERRCODE = 'OB103',
            DETAIL = format('(%s, %s) is not applicable in delivery set version %s',
                            v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_active.delivery_set_version);
    END IF;

    -- Idempotent re-append of the same event (same id, same digest).
    SELECT e.event_envelope_sha256 INTO v_existing FROM outbox.outbox_events e WHERE e.event_id = v_event_id;
    IF FOUND THEN
        IF v_existing <> v_digest THEN
            PERFORM outbox._envelope_fail(format('eventId %s already exists with a different envelope digest', v_event_id));
        END IF;
        RETURN QUERY SELECT v_event_id, v_existing,
                            (SELECT count(*)::integer FROM outbox.outbox_deliveries d WHERE d.event_id = v_event_id);
        RETURN;
    END IF;

    INSERT INTO outbox.outbox_events
        (event_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
         delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
         aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id,
         correlation_id, causation_id, operation_id, event_payload,
         event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, event_envelope_canonical)
    VALUES
        (v_event_id, v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_active.delivery_set_version,
         v_active.definition_schema_version, v_active.digest_algorithm_version, v_active.definition_digest,
         v_env ->> 'aggregateId', v_revision, v_tenant ->> 'tenantKind', v_tenant ->> 'tenantId',
         v_tenant ->> 'workspaceId', v_tenant ->> 'projectId',
         v_env ->> 'correlationId', v_env ->> 'causationId', v_env ->> 'operationId', v_payload,
         'jcs-sha256-v1', v_digest, v_occurred, v_canonical);

    -- One pending delivery per mandatory member (R-AP-4, R-AP-6).
    INSERT INTO outbox.outbox_deliveries
        (destination, event_id, delivery_set_version, consumer_name, expected_receipt_type,
         expected_receipt_schema_version, required_projection_name, required_projection_version,
         mandatory, aggregate_id, aggregate_revision)
    SELECT m.destination, v_event_id, m.delivery_set_version, m.consumer_name, m.expected_receipt_type,
           m.expected_receipt_schema_version, m.projection_name, m.projection_version,
           true, v_env ->> 'aggregateId', v_revision
    FROM outbox.delivery_set_members m
    WHERE m.delivery_set_version = v_active.delivery_set_version
      AND m.event_type = v_env ->> 'eventType'
      AND m.event_schema_version = v_env ->> 'eventSchemaVersion'
      AND m.mandatory;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count = 0 THEN
        RAISE EXCEPTION 'no mandatory member for this event pair' USING ERRCODE = 'OB103',
            DETAIL = format('(%s, %s) has no mandatory member in delivery set version %s',
                            v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_active.delivery_set_version);
    END IF;

    PERFORM pg_notify('outbox_delivery', m.destination)
    FROM outbox.delivery_set_members m
    WHERE m.delivery_set_version = v_active.delivery_set_version
      AND m.event_type = v_env ->> 'eventType'
      AND m.event_schema_version = v_env ->> 'eventSchemaVersion' AND m.mandatory;

    RETURN QUERY SELECT v_event_id, v_digest, v_count;
END
$fn$;

COMMENT ON FUNCTION outbox.append_event(json, text, text) IS
    'Append an EventEnvelope@1 with its frozen delivery set and pending deliveries (SPEC §3.2, D-2). Raises OB103, OB105, OB201. Caller: outbox_producer.';
REVOKE ALL ON FUNCTION outbox.append_event(json, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_event(json, text, text) TO outbox_producer;
