-- One receipt rule, one outcome-item parse, no reference kind named in kernel SQL (issue 23
-- items 1 and 4; SPEC R-AK-1a, R-AK-9, HP-1, HP-2):
--   * outbox._receipt_problem: the closed-receipt rule (members, types, required members,
--     integer form, schema version, digest algorithms), called by outbox._ack_problem (producer)
--     and inbox.record_receipt (inbox) alike. Integers: the stricter test of the two it replaces
--     (no fraction or exponent, |n| <= 2^53-1, not below the registered minimum).
--   * outbox.receipt_kinds.requires_projection (true for operations_projection) and
--     outbox.receipt_kind_members.minimum (0 for broker_publication.sequence) replace the kind
--     names the rule used to test; any registered kind can now have that behaviour.
--   * outbox.outcome_items + outbox._outcome_items: the one parse of an ack/retry/quarantine
--     batch (typed parallel arrays), used by ack_deliveries, retry_deliveries and
--     quarantine_deliveries; one call per batch (HP-1).
-- Two columns on two tiny registry tables (ACCESS EXCLUSIVE for a moment); function bodies
-- otherwise: no hot table is touched, nothing to stop. Details: docs/migrations.md.
SET LOCAL ROLE outbox_owner;

ALTER TABLE outbox.receipt_kinds ADD COLUMN requires_projection boolean NOT NULL DEFAULT false;
ALTER TABLE outbox.receipt_kind_members ADD COLUMN minimum bigint,
    ADD CONSTRAINT receipt_kind_members_minimum_integer CHECK (minimum IS NULL OR json_type = 'integer');
COMMENT ON COLUMN outbox.receipt_kinds.requires_projection IS
    'Receipts of this kind name a projection: inbox.record_receipt refuses one recorded without projection (OB002). SPEC R-AK-1a.';
COMMENT ON COLUMN outbox.receipt_kind_members.minimum IS
    'Smallest value of an integer member (NULL: none besides |n| <= 2^53-1). SPEC R-AK-1a.';
-- the registry is immutable (tg_registry__immutable): the two attributes of existing rows are
-- set with its triggers off, inside this transaction
ALTER TABLE outbox.receipt_kinds DISABLE TRIGGER tg_receipt_kinds__immutable;
UPDATE outbox.receipt_kinds SET requires_projection = true WHERE receipt_kind = 'operations_projection';
ALTER TABLE outbox.receipt_kinds ENABLE TRIGGER tg_receipt_kinds__immutable;
ALTER TABLE outbox.receipt_kind_members DISABLE TRIGGER tg_receipt_kind_members__immutable;
UPDATE outbox.receipt_kind_members SET minimum = 0 WHERE receipt_kind = 'broker_publication' AND member = 'sequence';
ALTER TABLE outbox.receipt_kind_members ENABLE TRIGGER tg_receipt_kind_members__immutable;

-- the closed-receipt rule and its two callers
{{ template "functions/_receipt_problem.sql" . }}
DROP FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text);
{{ template "functions/_ack_problem.sql" . }}
DROP FUNCTION inbox.record_receipt(text, text, integer, json, json, text, uuid);
{{ template "functions/record_receipt.sql" (dict "build_token" true) }}
-- the hot predicate's member piece takes the member's minimum instead of the kind's name (a
-- database migrated before this file changed still has the old signature)
DROP FUNCTION IF EXISTS outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, text);
{{ template "functions/_receipt_member_piece.sql" . }}

-- the parsed outcome items: element i of every array is item i, in input order
CREATE TYPE outbox.outcome_items AS (
    ord                      integer[],
    destination              text[],
    event_id                 uuid[],
    attempt_id               uuid[],
    lease_token              uuid[],
    ack                      json[],   -- ack_deliveries: the ack and receipt as sent
    receipt                  json[],
    receipt_jsonb            jsonb[],  -- the receipt parsed once (NULL unless an object)
    receipt_digest_candidate text[],
    error_code               text[],   -- retry_deliveries, quarantine_deliveries
    error_ref                text[],   -- sanitized
    reason                   text[],   -- quarantine_deliveries
    sqlstate                 text[],   -- 22023 for an item with a shape problem, else NULL
    detail                   text[]
);
COMMENT ON TYPE outbox.outcome_items IS
    'An ack/retry/quarantine batch parsed once (outbox._outcome_items): typed parallel arrays, element i = item i. SPEC R-AK-9, HP-2.';
{{ template "functions/_outcome_items.sql" . }}
DROP FUNCTION outbox.ack_deliveries(json);
{{ template "functions/ack_deliveries.sql" . }}
DROP FUNCTION outbox.retry_deliveries(json);
{{ template "functions/retry_deliveries.sql" . }}
DROP FUNCTION outbox.quarantine_deliveries(json);
{{ template "functions/quarantine_deliveries.sql" . }}

RESET ROLE;
