-- append_events (SPEC §13, R-AK-9, D-2): many envelopes in one call, set-based, with the one rule
-- set of append_event; append_event becomes append_events with a one-element array, and its hot
-- path refuses a canonical text that is not exactly canonical (OB201, as the slow path would).
SET LOCAL ROLE outbox_owner;

{{ template "functions/_append_fail.sql" . }}
{{ template "functions/_append_validate.sql" . }}
{{ template "functions/append_events.sql" . }}

-- append_event's body changed (docs/migrations.md rule 2): re-created from its file.
DROP FUNCTION outbox.append_event(json, text, text);
{{ template "functions/append_event.sql" . }}

RESET ROLE;
