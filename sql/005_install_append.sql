-- append_event, immutability and the deferred delivery-set anti-join (SPEC §3.2, R-SEC-3).
SET LOCAL ROLE outbox_owner;

-- Kernel settings that callers must not be able to change for themselves (a GUC could be set by
-- any session). Owner-only; read by the functions.
CREATE TABLE outbox.kernel_settings (
    name        text PRIMARY KEY CHECK (name IN ('max_payload_bytes')),
    value       bigint NOT NULL CHECK (value > 0),
    description text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO outbox.kernel_settings (name, value, description) VALUES
    ('max_payload_bytes', 1048576, 'largest accepted append_event document, in bytes of its JSON text');

{{ template "functions/_envelope_fail.sql" . }}
{{ template "functions/_event_envelope.sql" . }}
{{ template "functions/append_event.sql" . }}
{{ template "functions/verify_event_digests.sql" . }}
{{ template "triggers/outbox_events__immutable.sql" . }}
{{ template "triggers/outbox_deliveries__immutable.sql" . }}
{{ template "triggers/outbox_events__delivery_set_complete.sql" . }}

-- Grants (SPEC R-SEC-1): producers act only through append_event; the auditor reads.
GRANT SELECT ON outbox.outbox_events, outbox.outbox_deliveries, outbox.kernel_settings TO outbox_auditor;

RESET ROLE;
