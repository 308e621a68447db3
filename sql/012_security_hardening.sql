-- Security hardening (SPEC R-SEC-5, R-SEC-3, R-CL-6, D-5), from an outside review:
--   * consumers act only as themselves: inbox.consumer_roles binds each consumer name to a role;
--     record_receipt / read_receipt / observe_revision refuse (42501) any other caller;
--   * no advisory-lock key a kernel function waits on: registration/activation serialize on a
--     table lock of outbox.delivery_set_versions, observe_revision on the progress row (created
--     with last_revision 0 when an aggregate is first seen);
--   * linear canonicalization (_jcs_sort_key) and bounded jcs_* / record_receipt inputs;
--   * per_aggregate claims stay O(batch): blocked deliveries are parked at available_at
--     'infinity' and released when their chain's head ends; the claim's recovery step runs only
--     when an expired lease exists;
--   * TRUNCATE refused on the registry and kernel reference tables; bounded retry policies.
-- Every changed function file is re-included here (docs/migrations.md); functions whose language
-- or body shape changed are dropped first.
SET LOCAL ROLE outbox_owner;

-- R-SEC-5: consumer name -> role bindings (append-only; registrar binds through the function).
CREATE TABLE inbox.consumer_roles (
    consumer_name text PRIMARY KEY CHECK (consumer_name ~ '^[a-z0-9][a-z0-9._@-]*$' AND pg_catalog.length(consumer_name) <= 200),
    role_name     name NOT NULL,
    bound_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    bound_by      name NOT NULL DEFAULT session_user
);
COMMENT ON TABLE inbox.consumer_roles IS
    'Each consumer name is bound to the role whose members may act as it in the inbox functions (SPEC R-SEC-5); rows never change.';
REVOKE ALL ON inbox.consumer_roles FROM PUBLIC;
GRANT SELECT ON inbox.consumer_roles TO outbox_auditor;

{{ template "functions/_inbox_check_caller.sql" . }}
{{ template "functions/bind_consumer_role.sql" . }}
-- the registrar reaches the inbox schema for bind_consumer_role only (no table privileges)
GRANT USAGE ON SCHEMA inbox TO outbox_registrar;

-- observe_revision serializes on the progress row, created at 0 ("nothing applied yet").
ALTER TABLE inbox.inbox_revision_progress DROP CONSTRAINT inbox_revision_progress_last_revision_check;
ALTER TABLE inbox.inbox_revision_progress ADD CONSTRAINT inbox_revision_progress_last_revision_check
    CHECK (last_revision >= 0);

-- a consumer's receipt ref may be as long as the ack rule allows (500, was 200 here)
ALTER TABLE inbox.inbox_receipts DROP CONSTRAINT inbox_receipts_receipt_ref_check;
ALTER TABLE inbox.inbox_receipts ADD CONSTRAINT inbox_receipts_receipt_ref_check
    CHECK (receipt_ref <> '' AND pg_catalog.length(receipt_ref) <= 500);
DROP FUNCTION inbox.record_receipt(text, text, integer, json, json, text);
{{ template "functions/record_receipt.sql" . }}
DROP FUNCTION inbox.read_receipt(text, text, integer, uuid, text);
{{ template "functions/read_receipt.sql" . }}
DROP FUNCTION inbox.observe_revision(text, text, integer, text, bigint);
{{ template "functions/observe_revision.sql" . }}

-- No advisory keys (R-SEC-5).
DROP FUNCTION outbox.activate_delivery_set(integer, integer, text, text);
{{ template "functions/activate_delivery_set.sql" . }}
DROP FUNCTION outbox.register_delivery_set(json, text);
{{ template "functions/register_delivery_set.sql" . }}

-- Linear, bounded canonicalization (R-SEC-5).
DROP FUNCTION outbox._jcs_sort_key(text);
{{ template "functions/_jcs_sort_key.sql" . }}
DROP FUNCTION outbox._jcs_value(json, integer);
{{ template "functions/_jcs_value.sql" . }}
DROP FUNCTION outbox.jcs_sha256(json);
DROP FUNCTION outbox.jcs_canonicalize(json);
{{ template "functions/jcs_canonicalize.sql" . }}
{{ template "functions/jcs_sha256.sql" . }}
{{ template "functions/_jcs_text_problem.sql" . }}

-- Per-aggregate claims O(batch) (R-CL-6, R-CL-7): parked successors, released by the outcomes.
{{ template "functions/_release_successors.sql" . }}
DROP FUNCTION outbox._quarantine_write(text[], uuid[], uuid[], text, text[], text[], text[], timestamptz);
{{ template "functions/_quarantine_write.sql" . }}
DROP FUNCTION outbox.ack_deliveries(json);
{{ template "functions/ack_deliveries.sql" . }}
DROP FUNCTION outbox.append_events(json, text[], text[]);
{{ template "functions/append_events.sql" . }}
DROP FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text);
{{ template "functions/claim_deliveries.sql" . }}
-- deliveries already waiting behind an open earlier revision are parked now
UPDATE outbox.outbox_deliveries AS d
   SET available_at = 'infinity'
  FROM outbox.delivery_destinations AS dd
 WHERE dd.destination = d.destination AND dd.ordering = 'per_aggregate'
   AND d.status = 'pending' AND d.available_at <> 'infinity'
   AND EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS p
                WHERE p.destination = d.destination AND p.aggregate_id = d.aggregate_id
                  AND p.aggregate_revision < d.aggregate_revision AND p.status IN ('pending', 'leased'));

-- TRUNCATE refused on the registry and reference tables (R-SEC-3, R-SEC-5).
{{ template "triggers/kernel_tables__no_truncate.sql" . }}

-- Bounded retry policies (D-5, R-SEC-5): no policy can park a delivery for years or overflow.
ALTER TABLE outbox.outbox_retry_policies
    ADD CONSTRAINT outbox_retry_policies_bounds
    CHECK (base_delay <= interval '1 hour' AND max_delay <= interval '1 day');
DROP FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer);
{{ template "functions/set_retry_policy.sql" . }}

RESET ROLE;
