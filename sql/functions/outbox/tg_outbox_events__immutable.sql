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
