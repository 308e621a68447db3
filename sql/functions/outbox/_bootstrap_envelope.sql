-- outbox._bootstrap_envelope(legacy columns as text/timestamptz..., p_max_bytes bigint)
--   RETURNS record (reason, detail, the columns of outbox._append_validate)
-- Purpose: one legacy row of a bootstrap source (SPEC R-BS-2, R-BS-3, R-BS-4) turned into an
--   EventEnvelope@1 and checked with exactly the append rules (outbox._append_validate, slow
--   path: the database canonicalizes and computes the jcs-sha256-v1 digest). Never raises for a
--   bad row: reason is NULL for a valid envelope, else its bootstrap quarantine class
--     corrupt_envelope     eventId or occurredAt missing, a field of the wrong type/literal,
--                          a refinement (R-AP-7) violated (OB105)
--     corrupt_payload      payload missing, not JSON, not an object, or not storable (\u0000)
--     not_canonicalizable  the document cannot be canonicalized (OB201: duplicate key,
--                          non-integer or unsafe number, nesting)
--   with a short detail (never document content). The payload is taken as its JSON text, so
--   duplicate keys in a json column are seen.
-- Caller: outbox.bootstrap_legacy_events (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._bootstrap_envelope(p_event_id text, p_event_type text, p_event_schema_version text, p_aggregate_id text, p_aggregate_revision text, p_tenant_kind text, p_tenant_id text, p_workspace_id text, p_project_id text, p_correlation_id text, p_causation_id text, p_operation_id text, p_payload text, p_occurred_at timestamp with time zone, p_max_bytes bigint, OUT reason text, OUT detail text, OUT event_id uuid, OUT event_type text, OUT schema_version text, OUT aggregate_id text, OUT aggregate_revision bigint, OUT tenant_kind text, OUT tenant_id text, OUT workspace_id text, OUT project_id text, OUT correlation_id text, OUT causation_id text, OUT operation_id text, OUT event_payload jsonb, OUT occurred_at timestamp with time zone, OUT event_envelope_sha256 text, OUT event_envelope_canonical text)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_text text;
    v_json json;
    v_rec  record;
BEGIN
    IF p_event_id IS NULL OR p_occurred_at IS NULL THEN
        reason := 'corrupt_envelope';
        detail := 'event_id and occurred_at are required';
        RETURN;
    END IF;
    IF p_payload IS NULL THEN
        reason := 'corrupt_payload';
        detail := 'payload is NULL';
        RETURN;
    END IF;
    BEGIN
        v_json := p_payload::json;
    EXCEPTION WHEN invalid_text_representation OR untranslatable_character THEN
        reason := 'corrupt_payload';
        detail := 'payload is not JSON';
        RETURN;
    END;
    IF pg_catalog.json_typeof(v_json) <> 'object' THEN
        reason := 'corrupt_payload';
        detail := 'payload is not a JSON object';
        RETURN;
    END IF;
    v_text := '{"eventId":' || pg_catalog.to_json(p_event_id)::text
        || ',"eventType":' || coalesce(pg_catalog.to_json(p_event_type)::text, 'null')
        || ',"eventSchemaVersion":' || coalesce(pg_catalog.to_json(p_event_schema_version)::text, 'null')
        || ',"aggregateId":' || coalesce(pg_catalog.to_json(p_aggregate_id)::text, 'null')
        || ',"aggregateRevision":' || CASE WHEN p_aggregate_revision ~ '^-?[0-9]{1,20}$' THEN p_aggregate_revision
                                           ELSE coalesce(pg_catalog.to_json(p_aggregate_revision)::text, 'null') END
        || ',"tenant":' || pg_catalog.json_strip_nulls(pg_catalog.json_build_object(
               'tenantKind', p_tenant_kind, 'tenantId', p_tenant_id, 'workspaceId', p_workspace_id,
               'projectId', p_project_id))::text
        || CASE WHEN p_correlation_id IS NULL THEN '' ELSE ',"correlationId":' || pg_catalog.to_json(p_correlation_id)::text END
        || CASE WHEN p_causation_id IS NULL THEN '' ELSE ',"causationId":' || pg_catalog.to_json(p_causation_id)::text END
        || CASE WHEN p_operation_id IS NULL THEN '' ELSE ',"operationId":' || pg_catalog.to_json(p_operation_id)::text END
        || ',"occurredAt":"' || pg_catalog.to_char(p_occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '"'
        || ',"payload":' || p_payload || '}';
    BEGIN
        SELECT * INTO v_rec FROM outbox._append_validate(v_text::json, NULL, NULL, p_max_bytes, '');
    EXCEPTION
        WHEN SQLSTATE 'OB105' THEN
            reason := 'corrupt_envelope';
            GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
            detail := pg_catalog.left(coalesce(nullif(detail, ''), SQLERRM), 200);
            RETURN;
        WHEN SQLSTATE 'OB201' THEN
            reason := 'not_canonicalizable';
            GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
            detail := pg_catalog.left(SQLERRM || coalesce(': ' || nullif(detail, ''), ''), 200);
            RETURN;
        WHEN invalid_text_representation OR untranslatable_character OR character_not_in_repertoire THEN
            reason := 'corrupt_payload';
            detail := 'the envelope cannot be stored (invalid text or \u0000)';
            RETURN;
    END;
    event_id := v_rec.event_id; event_type := v_rec.event_type; schema_version := v_rec.schema_version;
    aggregate_id := v_rec.aggregate_id; aggregate_revision := v_rec.aggregate_revision;
    tenant_kind := v_rec.tenant_kind; tenant_id := v_rec.tenant_id; workspace_id := v_rec.workspace_id;
    project_id := v_rec.project_id; correlation_id := v_rec.correlation_id; causation_id := v_rec.causation_id;
    operation_id := v_rec.operation_id; event_payload := v_rec.event_payload; occurred_at := v_rec.occurred_at;
    event_envelope_sha256 := v_rec.event_envelope_sha256; event_envelope_canonical := v_rec.event_envelope_canonical;
END
$function$;

COMMENT ON FUNCTION outbox._bootstrap_envelope(text, text, text, text, text, text, text, text, text, text, text, text, text, timestamp with time zone, bigint) IS
    'Private: one legacy row as a validated EventEnvelope@1 with its database-computed digest, or its bootstrap quarantine class (SPEC R-BS-2, R-BS-3).';

REVOKE ALL ON FUNCTION outbox._bootstrap_envelope(text, text, text, text, text, text, text, text, text, text, text, text, text, timestamp with time zone, bigint) FROM PUBLIC;
