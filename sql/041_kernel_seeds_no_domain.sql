-- The kernel seeds no domain (SPEC D-1; issue 34 items 1, 2, 3, 6):
--   * outbox.register_receipt_kind and outbox.register_envelope_refinement: the registrar's way
--     to register a receipt kind (with its members and their bounds) and an R-AP-7 envelope
--     refinement, insert-or-compare like register_destination (OB101 on a conflict or a
--     malformed definition). outbox.receipt_kind_members.max_length: a string member's
--     registered maxLength, enforced with OB002 on every receipt path (outbox._receipt_problem
--     for record_receipt and the full ack rule, outbox._receipt_member_piece for the ack hot path).
--   * one kernel-wide default retry policy (outbox.outbox_retry_policy_default, the row '*',
--     changed through outbox.set_retry_policy('*', ...) with history like any policy) for every
--     destination without a row of its own; register_destination no longer inserts a row and the
--     retry paths (retry_deliveries, _dispatch_recover, preview_redelivery) read
--     coalesce(destination's row, default) in the same statement.
--   * the reference rows the old migrations seeded (four destinations, their retry-policy rows,
--     four receipt kinds with their members, two envelope refinements) are deleted where nothing
--     registered, delivered or receipted uses them; an install that uses them keeps them. A fresh
--     install ends with no destination, broker_publication as the only receipt kind and no
--     refinement: `make migrate-reference` registers the reference release through the
--     functions above.
--   * the reference mailbox effect leaves the kernel: mailbox.apply_reference_effect is dropped;
--     mailbox.ref_effects and mailbox.ref_key_sequences are dropped when empty, else moved to the
--     schema refmailbox (no data lost), where `make migrate-reference` creates the function again.
-- Locks: ACCESS EXCLUSIVE for a moment on the small registry tables; the two scans that decide
-- whether the seeded refinements are used read outbox_events/archived_events once (no index on
-- event_type). No hot table is rewritten. Details: docs/migrations.md.
SET LOCAL ROLE outbox_owner;

-- 1. registered string bounds -----------------------------------------------------------------
ALTER TABLE outbox.receipt_kind_members ADD COLUMN max_length integer,
    ADD CONSTRAINT receipt_kind_members_max_length_string
        CHECK (max_length IS NULL OR (json_type = 'string' AND max_length >= 0));
COMMENT ON COLUMN outbox.receipt_kind_members.max_length IS
    'Largest length (characters) of a string member (NULL: no bound). Registered by outbox.register_receipt_kind; enforced with OB002 on every receipt path. SPEC R-AK-1a, §13.';

-- 2. the kernel-wide default retry policy ------------------------------------------------------
-- One row, destination '*' (never a destination literal, D-4). Same columns, checks and triggers
-- (version bump, history, no TRUNCATE) as outbox.outbox_retry_policies; it cannot be deleted.
CREATE TABLE outbox.outbox_retry_policy_default (
    LIKE outbox.outbox_retry_policies INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    PRIMARY KEY (destination),
    CONSTRAINT outbox_retry_policy_default_one_row CHECK (destination = '*')
);
COMMENT ON TABLE outbox.outbox_retry_policy_default IS
    'The kernel-wide default retry policy (one row, destination ''*''): applies to every destination without a row in outbox_retry_policies. Changed by outbox.set_retry_policy(''*'', ...); every change recorded in outbox_retry_policy_history (destination ''*''). SPEC §2, D-1, D-5.';

-- tg_outbox_retry_policy_default__keep: the default retry policy row is never deleted or
--   truncated (OB202); it changes through outbox.set_retry_policy('*', ...) (SPEC §2, D-5).
-- Caller: trigger function, granted to nobody.
CREATE FUNCTION outbox.tg_outbox_retry_policy_default__keep()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'outbox.outbox_retry_policy_default cannot be deleted'
        USING ERRCODE = 'OB202', DETAIL = 'change the default with outbox.set_retry_policy(''*'', ...)';
END
$fn$;
COMMENT ON FUNCTION outbox.tg_outbox_retry_policy_default__keep() IS
    'Trigger: the default retry policy row is never deleted or truncated (OB202); it is changed with set_retry_policy(''*'', ...). SPEC §2, D-5.';
REVOKE ALL ON FUNCTION outbox.tg_outbox_retry_policy_default__keep() FROM PUBLIC;

CREATE TRIGGER tg_outbox_retry_policy_default__version
    BEFORE UPDATE ON outbox.outbox_retry_policy_default
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policies__version();
CREATE TRIGGER tg_outbox_retry_policy_default__keep
    BEFORE DELETE ON outbox.outbox_retry_policy_default
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policy_default__keep();
CREATE TRIGGER tg_outbox_retry_policy_default__no_truncate
    BEFORE TRUNCATE ON outbox.outbox_retry_policy_default
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_retry_policy_default__keep();
CREATE TRIGGER tg_outbox_retry_policy_default__history
    AFTER INSERT OR UPDATE ON outbox.outbox_retry_policy_default
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policies__history();

INSERT INTO outbox.outbox_retry_policy_default (destination, base_delay, multiplier, max_delay, jitter, max_attempts)
VALUES ('*', interval '1 second', 2, interval '5 minutes', 0.2, 20);
GRANT SELECT ON outbox.outbox_retry_policy_default TO outbox_auditor;

-- 3. D-1 for existing installs: the reference rows the old migrations seeded go where nothing
--    uses them (the registry tables are immutable: their row triggers are off for these deletes,
--    inside this transaction, as in 039)
CREATE TEMPORARY TABLE seeded_destinations ON COMMIT DROP AS
SELECT dd.destination
  FROM outbox.delivery_destinations AS dd
 WHERE dd.destination IN ('core_operations', 'metering_input_processor',
                          'billing_finalization_coordinator', 'billing_settlement_catch_up')
   AND NOT EXISTS (SELECT 1 FROM outbox.delivery_set_members AS m WHERE m.destination = dd.destination)
   AND NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d WHERE d.destination = dd.destination)
   AND NOT EXISTS (SELECT 1 FROM outbox.archived_deliveries AS d WHERE d.destination = dd.destination)
   AND NOT EXISTS (SELECT 1 FROM inbox.inbox_receipts AS r WHERE r.destination = dd.destination)
   AND NOT EXISTS (SELECT 1 FROM outbox.destination_claim_pauses AS p WHERE p.destination = dd.destination)
   AND NOT EXISTS (SELECT 1 FROM outbox.destination_claim_pause_log AS p WHERE p.destination = dd.destination)
   -- a policy an operator changed is a use too
   AND NOT EXISTS (SELECT 1 FROM outbox.outbox_retry_policies AS rp
                    WHERE rp.destination = dd.destination AND rp.policy_version > 1);
DELETE FROM outbox.outbox_retry_policies AS rp USING seeded_destinations AS s WHERE rp.destination = s.destination;
ALTER TABLE outbox.delivery_destinations DISABLE TRIGGER tg_delivery_destinations__immutable;
DELETE FROM outbox.delivery_destinations AS dd USING seeded_destinations AS s WHERE dd.destination = s.destination;
ALTER TABLE outbox.delivery_destinations ENABLE TRIGGER tg_delivery_destinations__immutable;

CREATE TEMPORARY TABLE seeded_kinds ON COMMIT DROP AS
SELECT k.receipt_kind
  FROM outbox.receipt_kinds AS k
 WHERE k.receipt_kind IN ('operations_projection', 'metering_input_processor',
                          'billing_finalization_coordinator', 'billing_settlement_catch_up')
   AND NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.receipt_kind = k.receipt_kind)
   AND NOT EXISTS (SELECT 1 FROM inbox.inbox_receipts AS r WHERE r.receipt_kind = k.receipt_kind)
   AND NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d WHERE d.ack_receipt_kind = k.receipt_kind);
ALTER TABLE outbox.receipt_kind_members DISABLE TRIGGER tg_receipt_kind_members__immutable;
DELETE FROM outbox.receipt_kind_members AS m USING seeded_kinds AS s WHERE m.receipt_kind = s.receipt_kind;
ALTER TABLE outbox.receipt_kind_members ENABLE TRIGGER tg_receipt_kind_members__immutable;
ALTER TABLE outbox.receipt_kinds DISABLE TRIGGER tg_receipt_kinds__immutable;
DELETE FROM outbox.receipt_kinds AS k USING seeded_kinds AS s WHERE k.receipt_kind = s.receipt_kind;
ALTER TABLE outbox.receipt_kinds ENABLE TRIGGER tg_receipt_kinds__immutable;

ALTER TABLE outbox.envelope_refinements DISABLE TRIGGER tg_envelope_refinements__immutable;
DELETE FROM outbox.envelope_refinements AS r
 WHERE (r.event_type, r.event_schema_version) IN (('run.created@2.0', '2.0'), ('wallet.reserved@2.0', '2.0'))
   AND NOT EXISTS (SELECT 1 FROM outbox.delivery_set_applicable_events AS a
                    WHERE a.event_type = r.event_type AND a.event_schema_version = r.event_schema_version)
   AND NOT EXISTS (SELECT 1 FROM outbox.outbox_events AS e
                    WHERE e.event_type = r.event_type AND e.schema_version = r.event_schema_version)
   AND NOT EXISTS (SELECT 1 FROM outbox.archived_events AS e
                    WHERE e.event_type = r.event_type AND e.schema_version = r.event_schema_version)
   AND NOT EXISTS (SELECT 1 FROM inbox.inbox_receipts AS x
                    WHERE x.event_type = r.event_type AND x.event_schema_version = r.event_schema_version);
ALTER TABLE outbox.envelope_refinements ENABLE TRIGGER tg_envelope_refinements__immutable;

-- 4. the reference mailbox effect leaves the kernel (refmailbox is the reference's schema; the
--    reference installer creates the function and, on a fresh install, the tables there)
DROP FUNCTION mailbox.apply_reference_effect(text, bigint, uuid, text, text, text);
DO $do$
BEGIN
    IF EXISTS (SELECT 1 FROM mailbox.ref_effects) OR EXISTS (SELECT 1 FROM mailbox.ref_key_sequences) THEN
        CREATE SCHEMA IF NOT EXISTS refmailbox;
        ALTER TABLE mailbox.ref_effects SET SCHEMA refmailbox;
        ALTER TABLE mailbox.ref_key_sequences SET SCHEMA refmailbox;
    ELSE
        DROP TABLE mailbox.ref_effects;
        DROP TABLE mailbox.ref_key_sequences;
    END IF;
END
$do$;


-- 5. the registrar's functions ------------------------------------------------------------------
-- outbox.register_receipt_kind(receipt_kind, receipt_type, field_prefix, time_field,
--   receipt_schema_version, members json, requires_projection DEFAULT false) RETURNS void
-- (public, SPEC R-AK-1a, D-1, §13)
-- Purpose: insert-or-compare of a receipt kind and its registered members. members: a JSON
--   object, member name -> {"type": "string"|"integer"|"boolean", "required": bool,
--   "minimum"?: integer (integer members), "maxLength"?: integer >= 0 (string members)}. The
--   same definition again is a no-op; kinds are immutable (a new schema version is a new kind).
-- Locking: the kind's row (INSERT ... ON CONFLICT: a concurrent registration of the same kind
--   waits, then compares).
-- SQLSTATEs: OB101 for every refusal, nothing changed: another definition under the kind, a
--   receipt type or field prefix of another kind, a malformed definition (the checks:
--   docs/contract.md#outboxregister_receipt_kind).
-- Caller: outbox_registrar.
CREATE FUNCTION outbox.register_receipt_kind(p_receipt_kind text, p_receipt_type text, p_field_prefix text,
                                             p_time_field text, p_receipt_schema_version integer, p_members json,
                                             p_requires_projection boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_members jsonb;
    v_problem text;
    v_have    outbox.receipt_kinds;
    v_same    boolean;
BEGIN
    v_problem := CASE
        WHEN p_receipt_kind IS NULL OR p_receipt_kind !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_receipt_kind) > 100
            THEN pg_catalog.format('receipt_kind %L must match ^[a-z0-9][a-z0-9._@-]*$ (at most 100 characters)', p_receipt_kind)
        WHEN p_receipt_type IS NULL OR p_receipt_type !~ '^[A-Z][A-Za-z0-9]*$' OR pg_catalog.length(p_receipt_type) > 100
            THEN pg_catalog.format('receipt_type %L must match ^[A-Z][A-Za-z0-9]*$ (at most 100 characters)', p_receipt_type)
        WHEN p_field_prefix IS NULL OR p_field_prefix !~ '^[a-z][A-Za-z0-9]*$' OR pg_catalog.length(p_field_prefix) > 100
            THEN pg_catalog.format('field_prefix %L must match ^[a-z][A-Za-z0-9]*$ (at most 100 characters)', p_field_prefix)
        WHEN p_time_field IS NULL OR p_time_field !~ '^[a-z][A-Za-z0-9]*$' OR pg_catalog.length(p_time_field) > 100
            THEN pg_catalog.format('time_field %L must match ^[a-z][A-Za-z0-9]*$ (at most 100 characters)', p_time_field)
        WHEN p_time_field IN (p_field_prefix || 'Ref', p_field_prefix || 'SchemaVersion', p_field_prefix || 'DigestAlgorithmVersion',
                              p_field_prefix || 'Digest', 'destination', 'consumerName', 'eventId',
                              'eventEnvelopeDigestAlgorithmVersion', 'eventEnvelopeSha256', 'kind')
            THEN pg_catalog.format('time_field %s is a common receipt member', p_time_field)
        WHEN p_receipt_schema_version IS NULL OR p_receipt_schema_version < 1
            THEN pg_catalog.format('receipt_schema_version %s must be a positive integer', p_receipt_schema_version)
        WHEN p_requires_projection IS NULL
            THEN 'requires_projection must be true or false'
        WHEN p_members IS NULL OR pg_catalog.json_typeof(p_members) <> 'object'
            THEN 'members must be a JSON object: member name -> {type, required, minimum?, maxLength?}'
        WHEN (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_members))
             <> (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(p_members::jsonb))
            THEN 'members names a member twice'
        WHEN (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_members)) > 64
            THEN 'at most 64 members'
    END;
    IF v_problem IS NULL THEN
        v_members := p_members::jsonb;
        SELECT pg_catalog.format('member %s: %s', pg_catalog.to_json(x.key)::text, x.problem) INTO v_problem
          FROM (SELECT e.key,
                       CASE WHEN e.key !~ '^[a-z][A-Za-z0-9]*$' OR pg_catalog.length(e.key) > 100
                            THEN 'the name must match ^[a-z][A-Za-z0-9]*$ (at most 100 characters)'
                            WHEN e.key IN (p_field_prefix || 'Ref', p_field_prefix || 'SchemaVersion',
                                           p_field_prefix || 'DigestAlgorithmVersion', p_field_prefix || 'Digest',
                                           'destination', 'consumerName', 'eventId', 'eventEnvelopeDigestAlgorithmVersion',
                                           'eventEnvelopeSha256', 'kind', p_time_field)
                            THEN 'named like a common receipt member or the time field'
                            WHEN pg_catalog.jsonb_typeof(e.value) <> 'object'
                            THEN 'must be an object {type, required, minimum?, maxLength?}'
                            WHEN EXISTS (SELECT 1 FROM pg_catalog.jsonb_object_keys(e.value) AS k(k)
                                          WHERE k.k NOT IN ('type', 'required', 'minimum', 'maxLength'))
                            THEN 'only type, required, minimum and maxLength are allowed'
                            WHEN NOT (e.value->'type') <@ '["string", "integer", "boolean"]'::jsonb
                                 OR pg_catalog.jsonb_typeof(e.value->'type') IS DISTINCT FROM 'string'
                            THEN 'type must be "string", "integer" or "boolean"'
                            WHEN pg_catalog.jsonb_typeof(e.value->'required') IS DISTINCT FROM 'boolean'
                            THEN 'required must be true or false'
                            WHEN e.value ? 'minimum' AND e.value->>'type' <> 'integer'
                            THEN 'minimum is a bound of integer members only'
                            WHEN e.value ? 'maxLength' AND e.value->>'type' <> 'string'
                            THEN 'maxLength is a bound of string members only'
                            WHEN e.value ? 'minimum' AND outbox._json_int(e.value->'minimum') IS NULL
                            THEN 'minimum must be an integer with |n| <= 2^53-1'
                            WHEN e.value ? 'maxLength' AND (outbox._json_int(e.value->'maxLength') IS NULL
                                                            OR outbox._json_int(e.value->'maxLength') NOT BETWEEN 0 AND 2147483647)
                            THEN 'maxLength must be an integer from 0 to 2147483647'
                       END AS problem
                  FROM pg_catalog.jsonb_each(v_members) AS e) AS x
         WHERE x.problem IS NOT NULL
         ORDER BY x.key COLLATE "C"
         LIMIT 1;
    END IF;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'receipt kind definition invalid'
            USING ERRCODE = 'OB101', DETAIL = v_problem,
                  HINT = 'outbox.register_receipt_kind(kind, type, field_prefix, time_field, schema_version, members, requires_projection) (SPEC §13)';
    END IF;

    INSERT INTO outbox.receipt_kinds AS k
           (receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version, requires_projection)
    SELECT p_receipt_kind, p_receipt_type, p_field_prefix, p_time_field, p_receipt_schema_version, p_requires_projection
     WHERE NOT EXISTS (SELECT 1 FROM outbox.receipt_kinds AS o
                        WHERE o.receipt_kind <> p_receipt_kind
                          AND (o.receipt_type = p_receipt_type OR o.field_prefix = p_field_prefix))
    ON CONFLICT (receipt_kind) DO NOTHING;
    IF FOUND THEN
        INSERT INTO outbox.receipt_kind_members (receipt_kind, member, json_type, required, minimum, max_length)
        SELECT p_receipt_kind, e.key, e.value->>'type', (e.value->>'required')::boolean,
               outbox._json_int(e.value->'minimum'), outbox._json_int(e.value->'maxLength')::integer
          FROM pg_catalog.jsonb_each(v_members) AS e;
        RETURN;
    END IF;

    SELECT k.* INTO v_have FROM outbox.receipt_kinds AS k WHERE k.receipt_kind = p_receipt_kind;
    IF NOT FOUND THEN
        SELECT pg_catalog.format('receipt type %s or field prefix %s is used by receipt kind %s',
                                 p_receipt_type, p_field_prefix, o.receipt_kind) INTO v_problem
          FROM outbox.receipt_kinds AS o
         WHERE o.receipt_type = p_receipt_type OR o.field_prefix = p_field_prefix
         ORDER BY o.receipt_kind LIMIT 1;
        RAISE EXCEPTION 'receipt kind definition invalid'
            USING ERRCODE = 'OB101', DETAIL = v_problem;
    END IF;
    SELECT (v_have.receipt_type, v_have.field_prefix, v_have.time_field, v_have.receipt_schema_version, v_have.requires_projection)
           IS NOT DISTINCT FROM (p_receipt_type, p_field_prefix, p_time_field, p_receipt_schema_version, p_requires_projection)
       AND NOT EXISTS (
           (SELECT m.member, m.json_type, m.required, m.minimum, m.max_length
              FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = p_receipt_kind
            EXCEPT
            SELECT e.key, e.value->>'type', (e.value->>'required')::boolean,
                   outbox._json_int(e.value->'minimum'), outbox._json_int(e.value->'maxLength')::integer
              FROM pg_catalog.jsonb_each(v_members) AS e)
           UNION ALL
           (SELECT e.key, e.value->>'type', (e.value->>'required')::boolean,
                   outbox._json_int(e.value->'minimum'), outbox._json_int(e.value->'maxLength')::integer
              FROM pg_catalog.jsonb_each(v_members) AS e
            EXCEPT
            SELECT m.member, m.json_type, m.required, m.minimum, m.max_length
              FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = p_receipt_kind))
      INTO v_same;
    IF NOT v_same THEN
        RAISE EXCEPTION 'receipt kind already registered differently (receipt kinds are immutable)'
            USING ERRCODE = 'OB101',
                  DETAIL = pg_catalog.format('receipt kind %s is %s@%s (prefix %s, time field %s, requires_projection=%s) with members %s',
                                             v_have.receipt_kind, v_have.receipt_type, v_have.receipt_schema_version,
                                             v_have.field_prefix, v_have.time_field, v_have.requires_projection,
                                             (SELECT coalesce(pg_catalog.string_agg(m.member, ', ' ORDER BY m.member COLLATE "C"), 'none')
                                                FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = p_receipt_kind)),
                  HINT = 'a new receipt schema version is a new kind';
    END IF;
END
$fn$;

COMMENT ON FUNCTION outbox.register_receipt_kind(text, text, text, text, integer, json, boolean) IS
    'Insert-or-compare of a receipt kind and its members {name: {type, required, minimum?, maxLength?}}; the same definition is a no-op, another one or a malformed one OB101. SPEC R-AK-1a, D-1, §13.';
REVOKE ALL ON FUNCTION outbox.register_receipt_kind(text, text, text, text, integer, json, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_receipt_kind(text, text, text, text, integer, json, boolean) TO outbox_registrar;

-- outbox.register_envelope_refinement(event_type, event_schema_version, required_members text[])
-- RETURNS void  (public, SPEC R-AP-7, D-1, §13)
-- Purpose: insert-or-compare of an R-AP-7 refinement: the optional envelope members
--   (correlationId, causationId, operationId, projectId) that an envelope of this pair must
--   carry. The same list again (any order) is a no-op; another list for the pair is refused.
-- Locking: a transaction-scoped advisory lock on the pair (a concurrent registration of the same
--   pair waits, then compares).
-- SQLSTATEs: OB101 literal out of form (^[a-z0-9][a-z0-9._@-]*$), an empty list, a NULL, an
--   unknown or repeated member, or another list already registered; nothing changes.
-- Caller: outbox_registrar.
CREATE FUNCTION outbox.register_envelope_refinement(p_event_type text, p_event_schema_version text,
                                                    p_required_members text[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_problem text;
    v_have    text[];
    v_want    text[];
BEGIN
    v_problem := CASE
        WHEN p_event_type IS NULL OR p_event_type !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_event_type) > 200
          OR p_event_schema_version IS NULL OR p_event_schema_version !~ '^[a-z0-9][a-z0-9._@-]*$'
          OR pg_catalog.length(p_event_schema_version) > 200
            THEN pg_catalog.format('event type %L and schema version %L must match ^[a-z0-9][a-z0-9._@-]*$', p_event_type, p_event_schema_version)
        WHEN p_required_members IS NULL OR pg_catalog.cardinality(p_required_members) = 0
            THEN 'required_members must name at least one member'
        WHEN EXISTS (SELECT 1 FROM pg_catalog.unnest(p_required_members) AS m(m)
                      WHERE m.m IS NULL OR m.m NOT IN ('correlationId', 'causationId', 'operationId', 'projectId'))
            THEN pg_catalog.format('required_members %s: each must be correlationId, causationId, operationId or projectId', p_required_members)
        WHEN (SELECT pg_catalog.count(DISTINCT m.m) FROM pg_catalog.unnest(p_required_members) AS m(m))
             <> pg_catalog.cardinality(p_required_members)
            THEN pg_catalog.format('required_members %s names a member twice', p_required_members)
    END;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'envelope refinement invalid' USING ERRCODE = 'OB101', DETAIL = v_problem;
    END IF;

    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('outbox.envelope_refinements/' || p_event_type || '/' || p_event_schema_version, 0));
    SELECT pg_catalog.array_agg(r.required_field ORDER BY r.required_field COLLATE "C") INTO v_have
      FROM outbox.envelope_refinements AS r
     WHERE r.event_type = p_event_type AND r.event_schema_version = p_event_schema_version;
    SELECT pg_catalog.array_agg(m.m ORDER BY m.m COLLATE "C") INTO v_want FROM pg_catalog.unnest(p_required_members) AS m(m);
    IF v_have IS NULL THEN
        INSERT INTO outbox.envelope_refinements (event_type, event_schema_version, required_field)
        SELECT p_event_type, p_event_schema_version, m.m FROM pg_catalog.unnest(v_want) AS m(m);
    ELSIF v_have IS DISTINCT FROM v_want THEN
        RAISE EXCEPTION 'envelope refinement already registered differently (refinements are immutable)'
            USING ERRCODE = 'OB101',
                  DETAIL = pg_catalog.format('%s (schema %s) requires %s', p_event_type, p_event_schema_version,
                                             pg_catalog.array_to_string(v_have, ', '));
    END IF;
END
$fn$;

COMMENT ON FUNCTION outbox.register_envelope_refinement(text, text, text[]) IS
    'Insert-or-compare of an R-AP-7 envelope refinement (optional members required for one event type/schema pair); another list for the pair OB101. SPEC R-AP-7, D-1, §13.';
REVOKE ALL ON FUNCTION outbox.register_envelope_refinement(text, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_envelope_refinement(text, text, text[]) TO outbox_registrar;


-- 6. registered bounds on every receipt path: the closed-receipt rule (record_receipt, the full
--    ack rule) and the ack hot path's member piece (a new argument: the member's maxLength)
-- outbox._receipt_problem(p_kind outbox.receipt_kinds, p_receipt json, p_doc jsonb) RETURNS text
-- (private, SPEC R-AK-1a; the rule is written out in docs/contract.md "The closed-receipt rule")
-- Purpose: THE closed-receipt rule, shared by the producer (outbox._ack_problem, for ack_delivery
--   and ack_deliveries) and the inbox (inbox.record_receipt): NULL when the receipt document
--   p_receipt (p_doc: the same, parsed as jsonb) is a closed document of kind p_kind, else the
--   first problem, in this order: an unknown member or a registered member of the wrong JSON
--   type or a string member longer than its registered maxLength (first by name, "C" order);
--   missing required members (<P>SchemaVersion and the kind's
--   required ones); an integer member (<P>SchemaVersion, the kind's integer members) not written
--   as a JSON integer without fraction or exponent, outside |n| <= 2^53-1 or below its
--   registered minimum; <P>SchemaVersion other than the kind's version; a digest algorithm
--   other than jcs-sha256-v1. Member names in the text are JSON-quoted.
-- One SQL expression (three subqueries on outbox.receipt_kind_members); never raises, changes
--   nothing. SQLSTATEs: none (each caller answers a problem with OB002).
-- Callers: outbox._ack_problem, inbox.record_receipt (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._receipt_problem(p_kind outbox.receipt_kinds, p_receipt json, p_doc jsonb)
RETURNS text
LANGUAGE sql
STABLE
-- search_path: not SET on purpose (a SET clause would stop inlining and cost a GUC save/restore);
-- it runs inside the pinned search_path of its SECURITY DEFINER callers; all is schema-qualified.
AS $fn$
    SELECT coalesce(
        -- 1. closed: every member common or registered for the kind, registered ones of their type
        (SELECT CASE WHEN m.member IS NULL
                     THEN pg_catalog.format('unknown member %s: %s receipts carry only the common members and those of outbox.receipt_kind_members',
                                            pg_catalog.to_json(e.key)::text, (p_kind).receipt_kind)
                     WHEN pg_catalog.jsonb_typeof(e.value) <> CASE m.json_type WHEN 'integer' THEN 'number' ELSE m.json_type END
                     THEN pg_catalog.format('member %s must be a JSON %s', pg_catalog.to_json(e.key)::text, m.json_type)
                     ELSE pg_catalog.format('member %s is longer than its maxLength %s', pg_catalog.to_json(e.key)::text, m.max_length) END
           FROM pg_catalog.jsonb_each(p_doc) AS e
           LEFT JOIN outbox.receipt_kind_members AS m ON m.receipt_kind = (p_kind).receipt_kind AND m.member = e.key
          WHERE e.key <> ALL (ARRAY[(p_kind).field_prefix || 'Ref', (p_kind).field_prefix || 'SchemaVersion',
                                    (p_kind).field_prefix || 'DigestAlgorithmVersion', (p_kind).field_prefix || 'Digest',
                                    'destination', 'consumerName', 'eventId', 'eventEnvelopeDigestAlgorithmVersion',
                                    'eventEnvelopeSha256', (p_kind).time_field])
            AND (m.member IS NULL
                 OR pg_catalog.jsonb_typeof(e.value) <> CASE m.json_type WHEN 'integer' THEN 'number' ELSE m.json_type END
                 OR pg_catalog.length(e.value #>> '{}') > m.max_length)
          ORDER BY e.key COLLATE "C"
          LIMIT 1),
        -- 2. required members present
        (SELECT 'missing required member(s): ' || pg_catalog.string_agg(r.member, ', ' ORDER BY r.member COLLATE "C")
           FROM (SELECT (p_kind).field_prefix || 'SchemaVersion' AS member
                 UNION ALL
                 SELECT m.member FROM outbox.receipt_kind_members AS m
                  WHERE m.receipt_kind = (p_kind).receipt_kind AND m.required) AS r
          WHERE NOT p_doc ? r.member
         HAVING pg_catalog.count(*) > 0),
        -- 3. integers (R-AK-1a): a JSON integer written without fraction or exponent (read from the
        --    json text: jsonb prints 1e0 as 1), |n| <= 2^53-1, not below the registered minimum
        (SELECT i.problem
           FROM (SELECT i.o, i.member,
                        CASE WHEN pg_catalog.jsonb_typeof(p_doc -> i.member) <> 'number'
                             THEN pg_catalog.format('member %s must be a JSON integer', pg_catalog.to_json(i.member)::text)
                             WHEN p_receipt ->> i.member !~ '^-?(0|[1-9][0-9]*)$'
                             THEN pg_catalog.format('%s %s must be an integer written without fraction or exponent',
                                                    pg_catalog.to_json(i.member)::text, p_receipt ->> i.member)
                             WHEN pg_catalog.abs((p_receipt ->> i.member)::numeric) > 9007199254740991
                             THEN pg_catalog.format('%s %s is not a safe integer (|n| <= 2^53-1)',
                                                    pg_catalog.to_json(i.member)::text, p_receipt ->> i.member)
                             WHEN (p_receipt ->> i.member)::numeric < i.minimum
                             THEN pg_catalog.format('%s %s is below its minimum %s',
                                                    pg_catalog.to_json(i.member)::text, p_receipt ->> i.member, i.minimum)
                        END AS problem
                   FROM (SELECT 0 AS o, (p_kind).field_prefix || 'SchemaVersion' AS member, NULL::bigint AS minimum
                         UNION ALL
                         SELECT 1, m.member, m.minimum FROM outbox.receipt_kind_members AS m
                          WHERE m.receipt_kind = (p_kind).receipt_kind AND m.json_type = 'integer') AS i
                  WHERE p_doc ? i.member) AS i
          WHERE i.problem IS NOT NULL
          ORDER BY i.o, i.member COLLATE "C"
          LIMIT 1),
        -- 4. the kind's schema version and digest algorithms
        CASE WHEN p_doc -> ((p_kind).field_prefix || 'SchemaVersion') IS DISTINCT FROM pg_catalog.to_jsonb((p_kind).receipt_schema_version)
             THEN pg_catalog.format('%sSchemaVersion %s: %s receipts use schema version %s', (p_kind).field_prefix,
                                    p_doc -> ((p_kind).field_prefix || 'SchemaVersion'), (p_kind).receipt_kind, (p_kind).receipt_schema_version)
             WHEN p_doc -> ((p_kind).field_prefix || 'DigestAlgorithmVersion') IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb
               OR p_doc -> 'eventEnvelopeDigestAlgorithmVersion' IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb
             THEN pg_catalog.format('%sDigestAlgorithmVersion and eventEnvelopeDigestAlgorithmVersion must be jcs-sha256-v1', (p_kind).field_prefix)
        END)
$fn$;

COMMENT ON FUNCTION outbox._receipt_problem(outbox.receipt_kinds, json, jsonb) IS
    'Private: the closed-receipt rule (members, types, string maxLength, required members, integer form, schema version, digest algorithm) - NULL or the problem; shared by outbox._ack_problem and inbox.record_receipt (SPEC R-AK-1a).';
REVOKE ALL ON FUNCTION outbox._receipt_problem(outbox.receipt_kinds, json, jsonb) FROM PUBLIC;

DROP FUNCTION outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, bigint);
-- outbox._receipt_member_piece(p_receipt jsonb, p_member text, p_json_type text,
--   p_projection_name text, p_projection_version integer, p_event_type text,
--   p_event_schema_version text, p_minimum bigint, p_max_length integer) RETURNS text
-- (private, SPEC R-AK-1a, R-AK-2, HP-1, HP-2)
-- Purpose: one registered member of a receipt kind in the canonical text the ack predicate of
--   outbox.ack_deliveries rebuilds: ',"<member>":<value>' when the receipt carries the member
--   with its registered JSON type (integers without fraction or exponent, |n| <= 2^53-1, not
--   below the registered minimum p_minimum; strings not longer than the registered maxLength
--   p_max_length) and, where the kernel knows the value, that value
--   (the frozen projection target, the event's type and schema version); NULL when the member is
--   absent or wrong - the rebuilt text then differs from the receipt's and the full rule
--   (outbox._receipt_problem through outbox._ack_problem) decides.
--   A plain SQL expression (no query, no SET clause, not SECURITY DEFINER): PostgreSQL inlines
--   it into the calling statement, so it is never a per-item function call (HP-1).
-- Caller: outbox.ack_deliveries; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._receipt_member_piece(p_receipt jsonb, p_member text, p_json_type text,
                                                        p_projection_name text, p_projection_version integer,
                                                        p_event_type text, p_event_schema_version text, p_minimum bigint,
                                                        p_max_length integer)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN p_member IS NOT NULL AND p_receipt ? p_member
                 AND CASE p_json_type
                         WHEN 'string' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'string'
                                            AND (p_max_length IS NULL OR pg_catalog.length(p_receipt->>p_member) <= p_max_length)
                         WHEN 'boolean' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'boolean'
                         WHEN 'integer' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'number'
                                             AND (p_receipt->p_member)::text ~ '^-?(0|[1-9][0-9]{0,15})$'
                                             AND pg_catalog.abs((p_receipt->p_member)::text::numeric) <= 9007199254740991
                                             AND (p_minimum IS NULL OR (p_receipt->p_member)::text::numeric >= p_minimum)
                         ELSE false END
                 AND CASE p_member
                         WHEN 'projectionName' THEN p_projection_name IS NULL
                                                    OR p_receipt->p_member = pg_catalog.to_jsonb(p_projection_name)
                         WHEN 'projectionVersion' THEN p_projection_name IS NULL
                                                       OR p_receipt->p_member = pg_catalog.to_jsonb(p_projection_version)
                         WHEN 'eventType' THEN p_receipt->p_member = pg_catalog.to_jsonb(p_event_type)
                         WHEN 'eventSchemaVersion' THEN p_receipt->p_member = pg_catalog.to_jsonb(p_event_schema_version)
                         ELSE true END
                THEN ',"' || p_member || '":' || (p_receipt->p_member)::text END
$fn$;

COMMENT ON FUNCTION outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, bigint, integer) IS
    'Private, inlined: ,"member":value of a registered receipt member that has its type and known value, else NULL (SPEC R-AK-1a, HP-1).';
REVOKE ALL ON FUNCTION outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, bigint, integer) FROM PUBLIC;

-- outbox.ack_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-1..4, R-AK-9, D-2, §12a HP-1..HP-4, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many ActiveConsumerAck@1 outcomes in one call and one transaction. p_items: a JSON array
--   (at most 1000) of {destination, eventId, attemptId, leaseToken, ack, receipt,
--   receiptDigestCandidate?}, parsed once by outbox._outcome_items. One row per item, in input
--   order: complete | not_complete | rejected with sqlstate and detail: 22023 (item shape), OB001
--   (fencing; a delivery named twice), OB002 (the ack rule, outbox._ack_problem). A rejected item
--   changes nothing. ONE statement judges every item by a cheap predicate; the full rule
--   (outbox._ack_item_problem) runs only for the items it rejects (HP-1). Plans: index lookups only
--   (HP-3). Time: clock_timestamp() once per call; publication (outbox._publish_events) its own.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable
--   (\u0000); OB002 publication finds an acknowledged delivery inconsistent with its event.
-- Caller: outbox_dispatcher (also through outbox.ack_delivery, a batch of one).
CREATE OR REPLACE FUNCTION outbox.ack_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_ord       integer[];
    v_dest      text[];
    v_event     uuid[];
    v_attempt   uuid[];
    v_token     uuid[];
    v_ack       json[];
    v_receipt   json[];
    v_rcb       jsonb[];
    v_cand      text[];
    v_state     text[];
    v_detail    text[];
    v_ctid      tid[];
    v_dup       boolean;
    v_events    uuid[];
    v_acked_dest  text[];
    v_acked_event uuid[];
    v_published uuid[];
BEGIN
    -- 1. parse once (HP-2): the one parser of outcome batches
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.ack, p.receipt, p.receipt_jsonb,
           p.receipt_digest_candidate, p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_rcb, v_cand, v_state, v_detail
      FROM outbox._outcome_items(p_items, 'ack_deliveries') AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    SELECT pg_catalog.count(*) <> pg_catalog.count(DISTINCT (u.dest, u.ev)) INTO v_dup
      FROM unnest(v_dest, v_event) AS u(dest, ev);

    -- 2. lock the named deliveries in a fixed order (concurrent batches cannot deadlock on them)
    PERFORM outbox._lock_deliveries(v_dest, v_event);

    -- 3. judge every item in one statement (a fresh statement: it sees the committed state of
    --    the rows locked above). fast_ok is the cheap predicate; the full rule runs only where it
    --    is false (a MATERIALIZED CTE evaluates each CASE once per item).
    WITH kinds AS MATERIALIZED (
        -- per destination of the batch, its receipt kind's canonical texts as format() templates,
        -- members in RFC 8785 order (COLLATE "C"; every member name is ASCII), each member
        -- written with a leading comma: %1$s time, %2$s Ref, %3$s Digest, %4$s consumerName,
        -- %5$s destination, %6$s eventEnvelopeSha256, %7$s eventId, %8$s SchemaVersion, and
        -- %9$s..%16$s the kind's registered members (outbox._receipt_member_piece, in member
        -- order; a kind with more than 8 has no template: its acks take the full rule)
        SELECT dd.destination AS k_dest, rk.receipt_kind, rk.receipt_type, rk.field_prefix AS p, rk.time_field,
               (SELECT '{' || pg_catalog.string_agg(t.piece, ',' ORDER BY t.k COLLATE "C") || '}'
                  FROM (VALUES ('kind', '"kind":' || pg_catalog.to_json(rk.receipt_kind)::text),
                               (rk.field_prefix || 'Ref', '"' || rk.field_prefix || 'Ref":%1$s'),
                               (rk.field_prefix || 'SchemaVersion', '"' || rk.field_prefix || 'SchemaVersion":%2$s'),
                               (rk.field_prefix || 'DigestAlgorithmVersion', '"' || rk.field_prefix || 'DigestAlgorithmVersion":"jcs-sha256-v1"'),
                               (rk.field_prefix || 'Digest', '"' || rk.field_prefix || 'Digest":%3$s')) AS t(k, piece)) AS ar_tmpl,
               CASE WHEN mm.n <= 8 THEN t.rc_tmpl END AS rc_tmpl,
               CASE WHEN mm.n <= 8 THEN t.cand_tmpl END AS cand_tmpl,
               coalesce(mm.mem, '{}'::text[]) AS mem, coalesce(mm.typ, '{}'::text[]) AS typ,
               coalesce(mm.mins, '{}'::bigint[]) AS mins, coalesce(mm.maxl, '{}'::integer[]) AS maxl,
               coalesce(mm.required, '{}'::text[]) AS required
          FROM outbox.delivery_destinations AS dd
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         CROSS JOIN LATERAL (
                SELECT pg_catalog.count(*) AS n,
                       pg_catalog.array_agg(m.member ORDER BY m.member COLLATE "C") AS mem,
                       pg_catalog.array_agg(m.json_type ORDER BY m.member COLLATE "C") AS typ,
                       pg_catalog.array_agg(m.minimum ORDER BY m.member COLLATE "C") AS mins,
                       pg_catalog.array_agg(m.max_length ORDER BY m.member COLLATE "C") AS maxl,
                       pg_catalog.array_agg(m.member) FILTER (WHERE m.required) AS required
                  FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = rk.receipt_kind
              ) AS mm
         CROSS JOIN LATERAL (
                SELECT pg_catalog.string_agg(b.piece, '' ORDER BY b.k COLLATE "C") AS rc_tmpl,
                       pg_catalog.string_agg(b.piece, '' ORDER BY b.k COLLATE "C") FILTER (WHERE b.in_candidate) AS cand_tmpl
                  FROM (SELECT v.k, v.piece, v.in_candidate
                          FROM (VALUES (rk.time_field, ',"' || rk.time_field || '":%1$s', false),
                                       (rk.field_prefix || 'Ref', ',"' || rk.field_prefix || 'Ref":%2$s', false),
                                       (rk.field_prefix || 'Digest', ',"' || rk.field_prefix || 'Digest":%3$s', false),
                                       ('consumerName', ',"consumerName":%4$s', true),
                                       ('destination', ',"destination":%5$s', true),
                                       ('eventEnvelopeSha256', ',"eventEnvelopeSha256":%6$s', true),
                                       ('eventId', ',"eventId":%7$s', true),
                                       (rk.field_prefix || 'SchemaVersion', ',"' || rk.field_prefix || 'SchemaVersion":%8$s', true),
                                       ('eventEnvelopeDigestAlgorithmVersion', ',"eventEnvelopeDigestAlgorithmVersion":"jcs-sha256-v1"', true),
                                       (rk.field_prefix || 'DigestAlgorithmVersion', ',"' || rk.field_prefix || 'DigestAlgorithmVersion":"jcs-sha256-v1"', true)
                               ) AS v(k, piece, in_candidate)
                        UNION ALL
                        SELECT m.member, '%' || (8 + m.i)::text || '$s', true
                          FROM pg_catalog.unnest(mm.mem) WITH ORDINALITY AS m(member, i)) AS b
              ) AS t
         WHERE dd.destination IN (SELECT DISTINCT x.dest FROM unnest(v_dest) AS x(dest))
    ), items AS (
        -- rn: the item's place among the items naming the same delivery (counted only when the
        -- batch names a delivery twice - no sort of the items otherwise)
        SELECT x.*,
               CASE WHEN v_dup THEN 1 + (SELECT pg_catalog.count(*) FROM unnest(v_dest, v_event, v_ord) AS y(dest, ev, ord)
                                          WHERE y.dest = x.dest AND y.ev = x.ev AND y.ord < x.ord)
                    ELSE 1 END AS rn
          FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_rcb, v_cand, v_state, v_detail)
               AS x(ord, dest, ev, att, tok, ack, rc, rcb, cand, state, detail)
    ), judged AS MATERIALIZED (
        SELECT u.ord, u.state, u.detail, d.ctid AS row_ctid,
               (u.state IS NULL AND u.rn = 1
                AND d.status = 'leased' AND d.current_attempt_id = u.att AND d.lease_token = u.tok
                AND d.lease_expires_at > v_now
                AND k.receipt_type = d.expected_receipt_type
                AND u.rcb ?& k.required
                AND (d.required_projection_name IS NULL OR u.rcb ?& ARRAY['projectionName', 'projectionVersion'])
                AND pg_catalog.jsonb_typeof(u.rcb->(k.p || 'Ref')) = 'string'
                AND pg_catalog.length(u.rcb->>(k.p || 'Ref')) BETWEEN 1 AND 500
                -- (the digest's form needs no test: it must equal the hex sha256 below)
                AND pg_catalog.jsonb_typeof(u.rcb->(k.p || 'Digest')) = 'string'
                -- the time: UTC RFC 3339 with 6 fractional digits and Z, a real date and time
                -- (digits everywhere but the separators, at their places; no regex: cheaper)
                AND pg_catalog.jsonb_typeof(u.rcb->k.time_field) = 'string'
                AND CASE WHEN pg_catalog.length(t.t) = 27
                              AND pg_catalog.translate(t.t, '0123456789', '') = '--T::.Z'
                              AND pg_catalog.substr(t.t, 5, 1) || pg_catalog.substr(t.t, 8, 1) || pg_catalog.substr(t.t, 11, 1)
                                  || pg_catalog.substr(t.t, 14, 1) || pg_catalog.substr(t.t, 17, 1)
                                  || pg_catalog.substr(t.t, 20, 1) || pg_catalog.substr(t.t, 27, 1) = '--T::.Z'
                              AND pg_catalog.substr(t.t, 1, 4) COLLATE "C" <> '0000'
                              AND pg_catalog.substr(t.t, 6, 2) COLLATE "C" BETWEEN '01' AND '12'
                              AND pg_catalog.substr(t.t, 9, 2) COLLATE "C" >= '01'
                              AND pg_catalog.substr(t.t, 12, 2) COLLATE "C" < '24'
                              AND pg_catalog.substr(t.t, 15, 2) COLLATE "C" < '60'
                              AND pg_catalog.substr(t.t, 18, 2) COLLATE "C" < '60'
                         THEN pg_catalog.substr(t.t, 9, 2)::integer
                              <= pg_catalog.date_part('day', pg_catalog.make_date(pg_catalog.substr(t.t, 1, 4)::integer,
                                                                                 pg_catalog.substr(t.t, 6, 2)::integer, 1)
                                                             + interval '1 month' - interval '1 day')
                         ELSE false END
                -- the receipt is exactly its canonical text rebuilt from what the kernel knows
                AND u.rc::text = '{' || pg_catalog.substr(pg_catalog.format(k.rc_tmpl, VARIADIC r.args), 2) || '}'
                -- its digest is jcs-sha256-v1 of the candidate (the same text minus Ref, Digest, time)
                AND pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
                        '{' || pg_catalog.substr(pg_catalog.format(k.cand_tmpl, VARIADIC r.args), 2) || '}', 'UTF8')), 'hex')
                    = u.rcb->>(k.p || 'Digest')
                -- and the ack is exactly the canonical ActiveConsumerAck@1 of that receipt
                AND u.ack::text = pg_catalog.format(
                        '{"appliedReceipt":%s,"consumerName":%s,"destination":%s,"eventEnvelopeDigestAlgorithmVersion":%s,"eventEnvelopeSha256":%s,"eventId":%s}',
                        pg_catalog.format(k.ar_tmpl, u.rcb->(k.p || 'Ref'), d.expected_receipt_schema_version, u.rcb->(k.p || 'Digest')),
                        pg_catalog.to_json(d.consumer_name), pg_catalog.to_json(d.destination),
                        pg_catalog.to_json(e.event_envelope_digest_algorithm_version),
                        pg_catalog.to_json(e.event_envelope_sha256), pg_catalog.to_json(d.event_id::text))
               ) IS TRUE AS fast_ok,
               u.dest, u.ev, u.att, u.tok, u.ack, u.rc, u.cand, u.rn
          FROM items AS u
          LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
          LEFT JOIN outbox.outbox_events AS e ON e.event_id = u.ev
          LEFT JOIN kinds AS k ON k.k_dest = u.dest
         CROSS JOIN LATERAL (SELECT u.rcb->>k.time_field AS t) AS t
         CROSS JOIN LATERAL (
                SELECT ARRAY[(u.rcb->k.time_field)::text, (u.rcb->(k.p || 'Ref'))::text, (u.rcb->(k.p || 'Digest'))::text,
                             pg_catalog.to_json(d.consumer_name)::text, pg_catalog.to_json(d.destination)::text,
                             pg_catalog.to_json(e.event_envelope_sha256)::text, pg_catalog.to_json(d.event_id::text)::text,
                             d.expected_receipt_schema_version::text,
                             outbox._receipt_member_piece(u.rcb, k.mem[1], k.typ[1], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[1], k.maxl[1]),
                             outbox._receipt_member_piece(u.rcb, k.mem[2], k.typ[2], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[2], k.maxl[2]),
                             outbox._receipt_member_piece(u.rcb, k.mem[3], k.typ[3], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[3], k.maxl[3]),
                             outbox._receipt_member_piece(u.rcb, k.mem[4], k.typ[4], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[4], k.maxl[4]),
                             outbox._receipt_member_piece(u.rcb, k.mem[5], k.typ[5], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[5], k.maxl[5]),
                             outbox._receipt_member_piece(u.rcb, k.mem[6], k.typ[6], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[6], k.maxl[6]),
                             outbox._receipt_member_piece(u.rcb, k.mem[7], k.typ[7], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[7], k.maxl[7]),
                             outbox._receipt_member_piece(u.rcb, k.mem[8], k.typ[8], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[8], k.maxl[8])
                            ] AS args
                OFFSET 0
              ) AS r
    )
    -- only the items the predicate rejected go through the rule itself (the same for one row or
    -- a batch): outbox._ack_item_problem; OFFSET 0 keeps it one call per such item
    SELECT pg_catalog.array_agg(CASE WHEN j.state IS NOT NULL THEN j.state
                                     WHEN j.fast_ok THEN NULL
                                     ELSE v.verdict[1] END ORDER BY j.ord),
           pg_catalog.array_agg(CASE WHEN j.state IS NOT NULL THEN j.detail
                                     WHEN j.fast_ok THEN NULL
                                     ELSE v.verdict[2] END ORDER BY j.ord),
           pg_catalog.array_agg(j.row_ctid ORDER BY j.ord)
      INTO v_state, v_detail, v_ctid
      FROM judged AS j
     CROSS JOIN LATERAL (
            SELECT CASE WHEN j.state IS NULL AND NOT j.fast_ok
                        THEN outbox._ack_item_problem(j.rn, j.dest, j.ev, j.att, j.tok, j.ack, j.rc, j.cand, v_now) END AS verdict
            OFFSET 0
          ) AS v;

    -- 4. the accepted items (R-AK-3): acknowledged with the ack columns (the ack equals the
    --    delivery, the event and the receipt's quartet: the judge proved it), found by ctid of the
    --    rows locked above, and their success finishes (keeping the receipt body for the audit
    --    sweep outbox.verify_ack_digests) - one statement
    WITH ok AS (
        SELECT u.row_ctid, u.dest, u.ev, u.att, u.tok, u.rc, u.rcb
          FROM unnest(v_ctid, v_dest, v_event, v_attempt, v_token, v_receipt, v_rcb, v_state)
               AS u(row_ctid, dest, ev, att, tok, rc, rcb, state)
         WHERE u.state IS NULL
    ), acked AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status                                      = 'acknowledged',
               delivered_at                                = v_now,
               lease_owner                                 = NULL,
               lease_token                                 = NULL,
               lease_expires_at                            = NULL,
               ack_consumer_name                           = d.consumer_name,
               ack_receipt_kind                            = rk.receipt_kind,
               ack_receipt_type                            = rk.receipt_type,
               ack_receipt_ref                             = ok.rcb->>(rk.field_prefix || 'Ref'),
               ack_receipt_schema_version                  = d.expected_receipt_schema_version,
               ack_receipt_digest_algorithm_version        = 'jcs-sha256-v1',
               ack_receipt_digest                          = ok.rcb->>(rk.field_prefix || 'Digest'),
               ack_event_envelope_digest_algorithm_version = ok.rcb->>'eventEnvelopeDigestAlgorithmVersion',
               ack_event_envelope_sha256                   = ok.rcb->>'eventEnvelopeSha256'
          FROM ok
          JOIN outbox.delivery_destinations AS dd ON dd.destination = ok.dest
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         WHERE d.ctid = ok.row_ctid
           -- true of every judged row (locked since step 2, so unchanged); written as one row
           -- comparison so it can only be a filter: the row is found by its ctid (a TID scan),
           -- never through an index a plan made on small tables might prefer (HP-3)
           AND (d.destination, d.event_id, d.status, d.current_attempt_id, d.lease_token)
               IS NOT DISTINCT FROM (ok.dest, ok.ev, 'leased', ok.att, ok.tok)
        RETURNING d.event_id, d.destination, d.current_attempt_id, ok.rc
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref, receipt)
        SELECT acked.current_attempt_id, v_now, 'acknowledged', 'none', NULL, NULL, acked.rc FROM acked
        RETURNING attempt_id
    )
    SELECT pg_catalog.array_agg(DISTINCT acked.event_id), pg_catalog.array_agg(acked.destination),
           pg_catalog.array_agg(acked.event_id)
      INTO v_events, v_acked_dest, v_acked_event
      FROM acked;

    -- 4b. an acknowledged head no longer holds its aggregate's chain (R-CL-6, R-CL-7)
    PERFORM outbox._release_successors(v_acked_dest, v_acked_event, v_now);

    -- 5. publication, once per event (R-AK-4, HP-4)
    v_published := outbox._publish_events(v_events, v_now);

    RETURN QUERY
    SELECT u.dest, u.ev, u.att,
           CASE WHEN u.state IS NOT NULL THEN 'rejected'
                WHEN u.ev = ANY (v_published) THEN 'complete'
                ELSE 'not_complete' END,
           u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_state, v_detail) AS u(ord, dest, ev, att, state, detail)
     ORDER BY u.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.ack_deliveries(json) IS
    'Record many ActiveConsumerAck@1 outcomes in one transaction, each fenced and validated by the same rule as ack_delivery (one predicate per batch, the full rule only for rejected items); one row per item in input order: complete | not_complete | rejected (sqlstate, detail). Publication once per completed event. SPEC R-AK-9, D-2, HP-1.';
REVOKE ALL ON FUNCTION outbox.ack_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_deliveries(json) TO outbox_dispatcher;


-- 7. the default retry policy on every retry path (LEFT JOIN + coalesce, same statement)
-- outbox.register_destination(destination, consumer_name, receipt_kind, receipt_type,
--                             receipt_schema_version, projection_required, ordering)
-- Purpose: insert-or-compare one row of the canonical destination registry (SPEC §2, §3.4,
--   R-CL-7 ordering option). Re-registering the identical destination is a no-op; any
--   difference (a destination rebound to another consumer, another receipt, another
--   projection branch or ordering) is refused: destinations are immutable once registered.
--   A new destination follows the kernel-wide default retry policy until an operator gives it
--   a row of its own (outbox.set_retry_policy; SPEC §2).
-- Locking: the destination row (ON CONFLICT) only.
-- Raises: OB101 invalid literal, unknown receipt kind, receipt type/schema not those of the
--   kind, or a conflicting re-registration.
-- Caller: outbox_registrar.
CREATE OR REPLACE FUNCTION outbox.register_destination(
    p_destination text,
    p_consumer_name text,
    p_receipt_kind text,
    p_receipt_type text,
    p_receipt_schema_version integer,
    p_projection_required boolean,
    p_ordering text DEFAULT 'none'
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_kind outbox.receipt_kinds%ROWTYPE;
    v_have outbox.delivery_destinations%ROWTYPE;
BEGIN
    IF p_destination IS NULL OR p_destination !~ '^[a-z0-9][a-z0-9._@-]*$'
       OR p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._@-]*$' THEN
        RAISE EXCEPTION 'destination and consumer name must match ^[a-z0-9][a-z0-9._@-]*$'
            USING ERRCODE = 'OB101', DETAIL = format('destination=%L consumer_name=%L', p_destination, p_consumer_name);
    END IF;
    IF p_ordering IS NULL OR p_ordering NOT IN ('none', 'per_aggregate') THEN
        RAISE EXCEPTION 'ordering must be none or per_aggregate'
            USING ERRCODE = 'OB101', DETAIL = format('ordering=%L', p_ordering);
    END IF;
    IF p_projection_required IS NULL THEN
        RAISE EXCEPTION 'projection_required must be true or false' USING ERRCODE = 'OB101';
    END IF;
    SELECT * INTO v_kind FROM outbox.receipt_kinds WHERE receipt_kind = p_receipt_kind;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown receipt kind'
            USING ERRCODE = 'OB101', DETAIL = format('receipt_kind=%L', p_receipt_kind);
    END IF;
    IF p_receipt_type IS DISTINCT FROM v_kind.receipt_type
       OR p_receipt_schema_version IS DISTINCT FROM v_kind.receipt_schema_version THEN
        RAISE EXCEPTION 'receipt type/schema do not match the receipt kind'
            USING ERRCODE = 'OB101',
                  DETAIL = format('kind %s expects %s@%s, got %s@%s', v_kind.receipt_kind, v_kind.receipt_type,
                                  v_kind.receipt_schema_version, p_receipt_type, p_receipt_schema_version);
    END IF;

    INSERT INTO outbox.delivery_destinations
        (destination, consumer_name, receipt_kind, receipt_type, receipt_schema_version, projection_required, ordering)
    VALUES (p_destination, p_consumer_name, p_receipt_kind, p_receipt_type, p_receipt_schema_version,
            p_projection_required, p_ordering)
    ON CONFLICT (destination) DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;

    SELECT * INTO v_have FROM outbox.delivery_destinations WHERE destination = p_destination;
    IF (v_have.consumer_name, v_have.receipt_kind, v_have.receipt_type, v_have.receipt_schema_version,
        v_have.projection_required, v_have.ordering)
       IS DISTINCT FROM
       (p_consumer_name, p_receipt_kind, p_receipt_type, p_receipt_schema_version, p_projection_required, p_ordering) THEN
        RAISE EXCEPTION 'destination already registered differently (destinations are immutable)'
            USING ERRCODE = 'OB101',
                  DETAIL = format('destination %s is bound to consumer %s, receipt %s@%s, projection_required=%s, ordering=%s',
                                  v_have.destination, v_have.consumer_name, v_have.receipt_type,
                                  v_have.receipt_schema_version, v_have.projection_required, v_have.ordering);
    END IF;
END
$fn$;

COMMENT ON FUNCTION outbox.register_destination(text, text, text, text, integer, boolean, text) IS
    'Insert-or-compare a destination of the canonical registry (SPEC §2, R-CL-7). Raises OB101. Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.register_destination(text, text, text, text, integer, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_destination(text, text, text, text, integer, boolean, text) TO outbox_registrar;

-- outbox.set_retry_policy(p_destination text, p_base_delay interval, p_multiplier numeric,
--                         p_max_delay interval, p_jitter numeric, p_max_attempts integer)
-- RETURNS integer  (public, operators; SPEC §2, D-5, R-AK-5)
-- Purpose: insert or change the retry policy of a registered destination, or with '*' the
--   kernel-wide default (outbox_retry_policy_default) every destination without a row follows;
--   returns the policy_version (1 for a new row, bumped on every change). Every change is
--   recorded in outbox_retry_policy_history (changed_by = session_user); an unchanged policy is
--   not rewritten. Applies to retries scheduled after the change.
-- Locking: the policy row (upsert).
-- SQLSTATEs: 22023 unknown destination or a value out of range: base_delay > 0,
--   1 <= multiplier <= 10, max_delay >= base_delay, 0 <= jitter < 1, 1 <= max_attempts <= 1000,
--   base_delay <= 1 hour and max_delay <= 1 day (R-SEC-5: no policy parks a delivery for years
--   or overflows the backoff arithmetic).
-- Caller: outbox_registrar (and outbox_owner).
CREATE OR REPLACE FUNCTION outbox.set_retry_policy(p_destination text, p_base_delay interval, p_multiplier numeric,
                                        p_max_delay interval, p_jitter numeric, p_max_attempts integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_version integer;
BEGIN
    IF p_destination IS DISTINCT FROM '*'
       AND NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = p_destination) THEN
        RAISE EXCEPTION 'set_retry_policy: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %L is not registered', p_destination);
    END IF;
    IF p_base_delay IS NULL OR p_base_delay <= interval '0' OR p_base_delay > interval '1 hour'
       OR p_multiplier IS NULL OR p_multiplier < 1 OR p_multiplier > 10
       OR p_max_delay IS NULL OR p_max_delay < p_base_delay OR p_max_delay > interval '1 day'
       OR p_jitter IS NULL OR p_jitter < 0 OR p_jitter >= 1
       OR p_max_attempts IS NULL OR p_max_attempts < 1 OR p_max_attempts > 1000 THEN
        RAISE EXCEPTION 'set_retry_policy: value out of range'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('need 0 < base_delay <= 1 hour, 1 <= multiplier <= 10, base_delay <= max_delay <= 1 day, 0 <= jitter < 1, 1 <= max_attempts <= 1000; got (%s, %s, %s, %s, %s)',
                                             p_base_delay, p_multiplier, p_max_delay, p_jitter, p_max_attempts);
    END IF;

    IF p_destination = '*' THEN
        UPDATE outbox.outbox_retry_policy_default AS rp
           SET base_delay = p_base_delay, multiplier = p_multiplier, max_delay = p_max_delay,
               jitter = p_jitter, max_attempts = p_max_attempts
         WHERE rp.destination = '*'
        RETURNING rp.policy_version INTO v_version;
        RETURN v_version;
    END IF;
    INSERT INTO outbox.outbox_retry_policies AS rp
           (destination, base_delay, multiplier, max_delay, jitter, max_attempts)
    VALUES (p_destination, p_base_delay, p_multiplier, p_max_delay, p_jitter, p_max_attempts)
    ON CONFLICT (destination) DO UPDATE
       SET base_delay   = EXCLUDED.base_delay,
           multiplier   = EXCLUDED.multiplier,
           max_delay    = EXCLUDED.max_delay,
           jitter       = EXCLUDED.jitter,
           max_attempts = EXCLUDED.max_attempts
     WHERE (rp.base_delay, rp.multiplier, rp.max_delay, rp.jitter, rp.max_attempts)
           IS DISTINCT FROM (EXCLUDED.base_delay, EXCLUDED.multiplier, EXCLUDED.max_delay, EXCLUDED.jitter, EXCLUDED.max_attempts)
    RETURNING rp.policy_version INTO v_version;
    IF v_version IS NULL THEN
        SELECT rp.policy_version INTO v_version FROM outbox.outbox_retry_policies AS rp WHERE rp.destination = p_destination;
    END IF;
    RETURN v_version;
END
$fn$;

COMMENT ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) IS
    'Insert or change a destination''s retry policy, or the default one with destination ''*'' (versioned, every change recorded in outbox_retry_policy_history); returns the policy_version. 22023 on unknown destination or out-of-range values. SPEC D-5.';
REVOKE ALL ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) TO outbox_registrar;

-- outbox.retry_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-5, R-AK-7, R-AK-9, R-AK-10, §13; how it works: docs/contract.md "Batch outcomes")
-- Retry policy: the destination's row, else the kernel-wide default (outbox_retry_policy_default).
-- Purpose: many retryable outcomes in one call and one transaction. p_items: a JSON array (at most
--   1000) of {destination, eventId, attemptId, leaseToken, errorCode, errorRef?}, parsed once by
--   outbox._outcome_items. One row per item in input order: pending (back to pending after the
--   policy's backoff), quarantined (max attempts since the last recovery reached: retry_exhausted;
--   awaiting_revision never exhausts) or rejected with sqlstate and detail: 22023 (shape, unknown
--   or non-retryable code), OB001 (fencing; a delivery named twice). A rejected item changes
--   nothing. Set-based, no per-item function call on the success path (HP-1); plans are index
--   lookups (HP-3). Time: clock_timestamp() once per call.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable.
-- Caller: outbox_dispatcher (also through outbox.retry_delivery, a batch of one).
CREATE OR REPLACE FUNCTION outbox.retry_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_ord     integer[];
    v_dest    text[];
    v_event   uuid[];
    v_attempt uuid[];
    v_token   uuid[];
    v_code    text[];
    v_ref     text[];
    v_state   text[];
    v_detail  text[];
    v_outcome text[];
BEGIN
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.error_code, p.error_ref, p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_ref, v_state, v_detail
      FROM outbox._outcome_items(p_items, 'retry_deliveries') AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);
    -- judge: fencing, then exhaustion by the policy
    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord),
           pg_catalog.array_agg(j.outcome ORDER BY j.ord)
      INTO v_state, v_detail, v_outcome
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail,
                   CASE WHEN u.state IS NOT NULL OR f.problem IS NOT NULL THEN 'rejected'
                        WHEN d.attempt_count - d.recovery_attempt_base >= coalesce(rp.max_attempts, dp.max_attempts)
                             AND u.code <> 'awaiting_revision' THEN 'quarantined'
                        ELSE 'pending' END AS outcome
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, code, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
              LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = u.dest
             CROSS JOIN outbox.outbox_retry_policy_default AS dp
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
             WHERE dp.destination = '*'
           ) AS j;

    -- pending: retryable finish, back to pending after the backoff
    WITH ok AS (
        SELECT u.dest, u.ev, u.att, u.tok, u.code, u.ref
          FROM unnest(v_dest, v_event, v_attempt, v_token, v_code, v_ref, v_outcome)
               AS u(dest, ev, att, tok, code, ref, outcome)
         WHERE u.outcome = 'pending'
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
        SELECT ok.att, v_now, 'retryable', 'retry_scheduled', ok.code, ok.ref FROM ok
        RETURNING attempt_id
    )
    UPDATE outbox.outbox_deliveries AS d
       SET status           = 'pending',
           available_at     = v_now + outbox._backoff_delay(
                                  ROW(ok.dest, coalesce(rp.base_delay, dp.base_delay), coalesce(rp.multiplier, dp.multiplier),
                                      coalesce(rp.max_delay, dp.max_delay), coalesce(rp.jitter, dp.jitter),
                                      coalesce(rp.max_attempts, dp.max_attempts), coalesce(rp.policy_version, dp.policy_version),
                                      coalesce(rp.updated_at, dp.updated_at))::outbox.outbox_retry_policies,
                                  d.attempt_count - d.recovery_attempt_base),
           lease_owner      = NULL,
           lease_token      = NULL,
           lease_expires_at = NULL,
           last_error_code  = ok.code,
           last_error_ref   = ok.ref
      FROM ok
      LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = ok.dest
     CROSS JOIN outbox.outbox_retry_policy_default AS dp
     WHERE d.destination = ok.dest AND d.event_id = ok.ev AND dp.destination = '*'
       AND d.status = 'leased' AND d.current_attempt_id = ok.att AND d.lease_token = ok.tok;

    -- exhausted: quarantined as retry_exhausted (the finish keeps the consumer's code and ref)
    PERFORM outbox._quarantine_write(pg_catalog.array_agg(u.dest), pg_catalog.array_agg(u.ev), pg_catalog.array_agg(u.att),
                                     'retryable', pg_catalog.array_agg('retry_exhausted'::text),
                                     pg_catalog.array_agg(u.code), pg_catalog.array_agg(u.ref), v_now)
       FROM unnest(v_dest, v_event, v_attempt, v_code, v_ref, v_outcome) AS u(dest, ev, att, code, ref, outcome)
      WHERE u.outcome = 'quarantined'
     HAVING pg_catalog.count(*) > 0;

    RETURN QUERY
    SELECT u.dest, u.ev, u.att, u.outcome, u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_outcome, v_state, v_detail)
           AS u(ord, dest, ev, att, outcome, state, detail)
     ORDER BY u.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.retry_deliveries(json) IS
    'Record many retryable outcomes in one transaction, each fenced like retry_delivery; one row per item in input order: pending | quarantined (retry_exhausted) | rejected (sqlstate, detail). awaiting_revision never exhausts. SPEC R-AK-5, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.retry_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retry_deliveries(json) TO outbox_dispatcher;

-- outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamptz)
-- RETURNS integer  (private, SPEC R-CL-2, R-AK-5, R-AK-8, R-AK-10)
-- Purpose: lease-expiry recovery in ONE statement. For up to p_max_rows leased deliveries whose
--   lease expired at p_now (all destinations when p_destinations is NULL): append the finish
--   lease_expired_unknown to the open attempt and make the delivery pending again, or quarantine
--   it (retry_exhausted) when that was its last allowed attempt. Returns how many attempts it closed.
-- Locking: FOR UPDATE SKIP LOCKED on the delivery rows (never waits for a worker finishing its row).
-- SQLSTATEs: none of its own.
-- Design notes (fencing race, index): docs/performance-notes.md#outbox_dispatch_recover
-- Caller: outbox.recover_expired_leases and outbox.claim_deliveries; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_count       integer;
    v_quarantined integer;
BEGIN
    -- expired on the last allowed attempt: quarantined (set-based, the one quarantine write)
    WITH exhausted AS (
        SELECT d.destination, d.event_id, d.current_attempt_id
          FROM outbox.outbox_deliveries AS d
          LEFT JOIN outbox.outbox_retry_policies AS p ON p.destination = d.destination
         WHERE d.status = 'leased'
           AND d.lease_expires_at <= p_now
           AND (p_destinations IS NULL OR d.destination = ANY (p_destinations))
           -- the default: an uncorrelated subquery, evaluated once (an InitPlan), no join to reorder
           AND d.attempt_count - d.recovery_attempt_base
               >= coalesce(p.max_attempts, (SELECT dp.max_attempts FROM outbox.outbox_retry_policy_default AS dp
                                             WHERE dp.destination = '*'))
         ORDER BY d.lease_expires_at
         LIMIT p_max_rows
           FOR UPDATE OF d SKIP LOCKED
    )
    SELECT coalesce(outbox._quarantine_write(pg_catalog.array_agg(x.destination), pg_catalog.array_agg(x.event_id),
                                             pg_catalog.array_agg(x.current_attempt_id), 'lease_expired_unknown',
                                             pg_catalog.array_agg('retry_exhausted'::text),
                                             pg_catalog.array_agg('retry_exhausted'::text),
                                             pg_catalog.array_agg('lease expired on the last allowed attempt'::text), p_now), 0)
      INTO v_quarantined
      FROM exhausted AS x
    HAVING pg_catalog.count(*) > 0;
    v_quarantined := coalesce(v_quarantined, 0);

    WITH expired AS (
        SELECT d.ctid AS row_ctid, d.current_attempt_id
          FROM outbox.outbox_deliveries AS d
         WHERE d.status = 'leased'
           AND d.lease_expires_at <= p_now
           AND (p_destinations IS NULL OR d.destination = ANY (p_destinations))
         ORDER BY d.lease_expires_at
         LIMIT p_max_rows
           FOR UPDATE SKIP LOCKED
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
        SELECT x.current_attempt_id, p_now, 'lease_expired_unknown', 'reclaimable', NULL, NULL
          FROM expired AS x
         WHERE x.current_attempt_id IS NOT NULL
        ON CONFLICT (attempt_id) DO NOTHING
        RETURNING attempt_id
    ), moved AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status           = 'pending',
               available_at     = p_now,
               lease_owner      = NULL,
               lease_token      = NULL,
               lease_expires_at = NULL
         WHERE d.ctid = ANY (ARRAY(SELECT x.row_ctid FROM expired AS x))
           AND d.status = 'leased'
        RETURNING d.event_id
    )
    SELECT pg_catalog.count(*)::integer INTO v_count FROM moved;
    RETURN v_count + v_quarantined;
END
$fn$;

COMMENT ON FUNCTION outbox._dispatch_recover(text[], integer, timestamptz) IS
    'Private: close expired leases as lease_expired_unknown and make their deliveries pending again, one bounded SKIP LOCKED statement (SPEC R-CL-2).';
REVOKE ALL ON FUNCTION outbox._dispatch_recover(text[], integer, timestamptz) FROM PUBLIC;

-- outbox.preview_redelivery(p_destination text, p_event_id uuid)
-- RETURNS TABLE (destination text, event_id uuid, event_type text, consumer_name text,
--                status text, attempt_count integer, quarantine_reason text,
--                quarantined_at timestamptz, published boolean, would_change text)
-- (public, SPEC R-AK-10, §13)
-- Purpose: the impact preview of a controlled recovery: exactly one row saying what
--   outbox.redeliver_quarantined would do to this delivery, without changing anything; would_change
--   in plain language, or "nothing" with the reason it would refuse (OB602). Never payload content.
-- Locking: none (plain MVCC reads; redeliver_quarantined re-checks under the row lock).
-- SQLSTATEs: 22023 a NULL argument or no delivery for (destination, event_id).
-- Design notes: docs/operations.md#outboxpreview_redelivery
-- Callers: outbox_operator (before a recovery), outbox_auditor (read-only).
CREATE OR REPLACE FUNCTION outbox.preview_redelivery(p_destination text, p_event_id uuid)
RETURNS TABLE (destination text, event_id uuid, event_type text, consumer_name text, status text,
               attempt_count integer, quarantine_reason text, quarantined_at timestamptz,
               published boolean, would_change text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_d          outbox.outbox_deliveries;
    v_type       text;
    v_schema     text;
    v_q          outbox.outbox_quarantine;
    v_published  timestamptz;
    v_open       integer;
    v_total      integer;
    v_max        integer;
    v_recoveries integer;
    v_change     text;
BEGIN
    IF p_destination IS NULL OR p_event_id IS NULL THEN
        RAISE EXCEPTION 'preview_redelivery: destination and event_id are required'
            USING ERRCODE = '22023', DETAIL = 'pass the destination and the event id of one delivery';
    END IF;
    SELECT d.* INTO v_d
      FROM outbox.outbox_deliveries AS d
     WHERE d.destination = p_destination AND d.event_id = p_event_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'preview_redelivery: no such delivery'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('no delivery %s/%s', pg_catalog.left(p_destination, 200), p_event_id);
    END IF;
    SELECT e.event_type, e.schema_version INTO v_type, v_schema
      FROM outbox.outbox_events AS e WHERE e.event_id = p_event_id;
    SELECT p.published_at INTO v_published
      FROM outbox.outbox_publications AS p WHERE p.event_id = p_event_id;

    IF v_d.status <> 'quarantined' THEN
        v_change := pg_catalog.format(
            'nothing: the delivery is %s, not quarantined; outbox.redeliver_quarantined refuses it (OB602)%s',
            v_d.status,
            CASE v_d.status
                WHEN 'pending' THEN ' - it is already waiting for its next attempt'
                WHEN 'leased' THEN ' - an attempt is in flight'
                WHEN 'acknowledged' THEN ' - the consumer acknowledged it'
                ELSE '' END);
    ELSE
        SELECT q.* INTO v_q
          FROM outbox.outbox_quarantine AS q
         WHERE q.destination = p_destination AND q.event_id = p_event_id
         ORDER BY q.quarantine_id DESC
         LIMIT 1;
        SELECT pg_catalog.count(*) FILTER (WHERE d.status <> 'acknowledged'), pg_catalog.count(*)
          INTO v_open, v_total
          FROM outbox.outbox_deliveries AS d
         WHERE d.event_id = p_event_id AND d.mandatory;
        SELECT coalesce(rp.max_attempts, dp.max_attempts) INTO v_max
          FROM outbox.outbox_retry_policy_default AS dp
          LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = p_destination
         WHERE dp.destination = '*';
        SELECT pg_catalog.count(*) INTO v_recoveries
          FROM outbox.outbox_recoveries AS r
         WHERE r.destination = p_destination AND r.event_id = p_event_id;
        v_change := pg_catalog.format(
            're-deliver the original event %s (%s, schema %s, envelope sha256 %s, unchanged) to %s '
            '(consumer %s, expected receipt %s v%s%s) as attempt %s: quarantined -> pending, due now. '
            'The retry budget restarts: %s more attempts before it is quarantined again (retry_exhausted). '
            'Quarantine row %s (reason %s, since %s) gets acknowledged_at and the case id; one audit row is written%s. '
            'Publication: %s',
            p_event_id, v_type, v_schema, v_q.event_envelope_sha256, p_destination,
            v_d.consumer_name, v_d.expected_receipt_type, v_d.expected_receipt_schema_version,
            CASE WHEN v_d.required_projection_name IS NOT NULL
                 THEN pg_catalog.format(', projection %s v%s', v_d.required_projection_name, v_d.required_projection_version)
                 ELSE '' END,
            v_d.attempt_count + 1,
            coalesce(v_max::text, 'the policy''s max_attempts'),
            v_q.quarantine_id, v_q.reason, v_q.quarantined_at,
            CASE WHEN v_recoveries > 0 THEN pg_catalog.format(' (re-delivered %s time(s) before)', v_recoveries) ELSE '' END,
            CASE WHEN v_published IS NOT NULL
                 THEN pg_catalog.format('already published at %s; stays so with that time', v_published)
                 WHEN v_open = 1
                 THEN 'open; this is the event''s last unacknowledged delivery, so the event is published when it is acknowledged'
                 ELSE pg_catalog.format('open; %s of the event''s %s deliveries are not acknowledged', v_open, v_total) END);
    END IF;

    RETURN QUERY
    SELECT v_d.destination, v_d.event_id, v_type, v_d.consumer_name, v_d.status, v_d.attempt_count,
           v_q.reason, v_q.quarantined_at, v_published IS NOT NULL, v_change;
END
$fn$;

COMMENT ON FUNCTION outbox.preview_redelivery(text, uuid) IS
    'Impact preview of a controlled recovery: one row - event, frozen consumer, status, attempts, current quarantine reason/time, published, would_change in plain language. Changes nothing. 22023 no such delivery. SPEC R-AK-10. Callers: outbox_operator, outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.preview_redelivery(text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.preview_redelivery(text, uuid) TO outbox_operator, outbox_auditor;


-- the destination's policy row is no longer created on demand
DROP FUNCTION outbox._ensure_retry_policy(text);

RESET ROLE;
