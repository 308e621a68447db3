-- outbox.console_event(p_event_id uuid)
-- RETURNS TABLE (event_id uuid, event_type text, schema_version text, delivery_set_version integer,
--                ..., occurred_at timestamptz, created_at timestamptz, published_at timestamptz,
--                payload_bytes integer)  (22 columns: see CREATE below)
-- (public, operator console, issue 25 item 1; SPEC R-OP-4, R-AK-4)
-- Purpose: the envelope metadata of one event in the hot tables for the console's delivery
--   detail (type, quartet, aggregate, tenant, ids, digest, times, payload size). Never the payload
--   itself (outbox.console_event_payload). Zero rows for an unknown or archived event id.
-- Cost: primary-key lookups on outbox_events and outbox_publications.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL event id.
-- Design notes: docs/read-model.md#outboxconsole_event
-- Callers: outbox_auditor (the console's read session).
CREATE OR REPLACE FUNCTION outbox.console_event(p_event_id uuid)
 RETURNS TABLE(event_id uuid, event_type text, schema_version text, delivery_set_version integer, definition_schema_version integer, digest_algorithm_version text, definition_digest text, aggregate_id text, aggregate_revision bigint, tenant_kind text, tenant_id text, workspace_id text, project_id text, correlation_id text, causation_id text, operation_id text, event_envelope_digest_algorithm_version text, event_envelope_sha256 text, occurred_at timestamp with time zone, created_at timestamp with time zone, published_at timestamp with time zone, payload_bytes integer)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_event_id IS NULL THEN
        RAISE EXCEPTION 'console_event: event_id is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT e.event_id, e.event_type, e.schema_version, e.delivery_set_version,
           e.delivery_set_definition_schema_version, e.delivery_set_definition_digest_algorithm_version,
           e.delivery_set_definition_digest, e.aggregate_id, e.aggregate_revision, e.tenant_kind, e.tenant_id,
           e.workspace_id, e.project_id, e.correlation_id, e.causation_id, e.operation_id,
           e.event_envelope_digest_algorithm_version, e.event_envelope_sha256, e.occurred_at, e.created_at,
           p.published_at, pg_catalog.octet_length(e.event_payload::text)
      FROM outbox.outbox_events AS e
      LEFT JOIN outbox.outbox_publications AS p ON p.event_id = e.event_id
     WHERE e.event_id = p_event_id;
END
$function$;

COMMENT ON FUNCTION outbox.console_event(uuid) IS
    'Operator console: one event''s envelope metadata, digest, delivery-set quartet and publication time - never the payload. Zero rows when unknown. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_event(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_event(uuid) TO outbox_auditor;
