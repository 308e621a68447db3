-- outbox._event_envelope(e outbox.outbox_events) -> jsonb
-- The EventEnvelope@1 object (SPEC D-3) rebuilt from an event's stored columns: the object the
-- event digest covers. Absent optional fields are omitted, never null; occurredAt is UTC RFC 3339
-- with exactly six fractional digits and Z. Private helper; granted to nobody. No SET search_path
-- on purpose, so the planner can inline it into the claim query: every name is schema-qualified
-- (pg_catalog operators resolve first under any search_path).
CREATE OR REPLACE FUNCTION outbox._event_envelope(e outbox.outbox_events)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT pg_catalog.jsonb_build_object(
               'eventId', e.event_id::text,
               'eventType', e.event_type,
               'eventSchemaVersion', e.schema_version,
               'aggregateId', e.aggregate_id,
               'aggregateRevision', e.aggregate_revision,
               'tenant', pg_catalog.jsonb_build_object('tenantKind', e.tenant_kind, 'tenantId', e.tenant_id,
                                                       'workspaceId', e.workspace_id)
                         || CASE WHEN e.project_id IS NULL THEN '{}'::jsonb
                                 ELSE pg_catalog.jsonb_build_object('projectId', e.project_id) END,
               'occurredAt', pg_catalog.to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
               'payload', e.event_payload)
           || CASE WHEN e.correlation_id IS NULL THEN '{}'::jsonb
                   ELSE pg_catalog.jsonb_build_object('correlationId', e.correlation_id) END
           || CASE WHEN e.causation_id IS NULL THEN '{}'::jsonb
                   ELSE pg_catalog.jsonb_build_object('causationId', e.causation_id) END
           || CASE WHEN e.operation_id IS NULL THEN '{}'::jsonb
                   ELSE pg_catalog.jsonb_build_object('operationId', e.operation_id) END
$function$;

REVOKE ALL ON FUNCTION outbox._event_envelope(outbox.outbox_events) FROM PUBLIC;
