-- inbox.record_observation_receipt as one insert-or-compare (SPEC R-OB-4): the insert of a receipt
-- of the accepted digest, then the stored receipt decides existing | OB301 | OB002 - the same
-- answers as migration 028's retry loop, with one statement fewer on the success path.
SET LOCAL ROLE outbox_owner;

DROP FUNCTION inbox.record_observation_receipt(text, text, integer, uuid, text);
{{ template "functions/record_observation_receipt.sql" . }}

RESET ROLE;
