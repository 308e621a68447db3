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
{{ template "functions/quarantine_delivery.sql" . }}

DROP FUNCTION outbox._append_validate(json, text, text, bigint, text);
{{ template "functions/_append_validate.sql" . }}

RESET ROLE;
