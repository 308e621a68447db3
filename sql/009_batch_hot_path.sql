-- Batch hot path (SPEC D-2, §2, R-AK-1a, R-AK-5, R-AK-9, §12a): canonical envelope stored once,
-- publications in a narrow table, set-based outcome functions.
SET LOCAL ROLE outbox_owner;

-- D-2 / P-5: the canonical envelope bytes the database verified at append are stored once, so a
-- claim returns them and a dispatcher checks sha256(bytes) instead of re-canonicalizing. NULL only for
-- rows written outside append_event (tests that simulate tampering): readers then canonicalize.
ALTER TABLE outbox.outbox_events ADD COLUMN event_envelope_canonical text;
ALTER TABLE outbox.outbox_events DISABLE TRIGGER tg_outbox_events__immutable;
UPDATE outbox.outbox_events AS e
   SET event_envelope_canonical = outbox.jcs_canonicalize(outbox._event_envelope(e)::json);
ALTER TABLE outbox.outbox_events ENABLE TRIGGER tg_outbox_events__immutable;

-- R-AK-1a: receipts are closed documents. Besides the common members (<prefix>Ref/SchemaVersion/
-- DigestAlgorithmVersion/Digest, destination, consumerName, eventId, eventEnvelope*, the kind's
-- time field) a receipt may carry exactly the members registered here for its kind.
CREATE TABLE outbox.receipt_kind_members (
    receipt_kind text NOT NULL REFERENCES outbox.receipt_kinds (receipt_kind),
    member       text NOT NULL CHECK (member ~ '^[a-z][A-Za-z0-9]*$'),
    json_type    text NOT NULL CHECK (json_type IN ('string', 'integer', 'boolean')),
    required     boolean NOT NULL,
    PRIMARY KEY (receipt_kind, member)
);
INSERT INTO outbox.receipt_kind_members (receipt_kind, member, json_type, required)
SELECT k.receipt_kind, m.member, m.json_type, m.required
  FROM outbox.receipt_kinds AS k
  JOIN (VALUES
        ('operations_projection', 'projectionName', 'string', true),
        ('operations_projection', 'projectionVersion', 'integer', true),
        ('operations_projection', 'eventType', 'string', true),
        ('operations_projection', 'eventSchemaVersion', 'string', true),
        ('operations_projection', 'projectionOutcome', 'string', false),
        ('metering_input_processor', 'consumerOutcome', 'string', false),
        ('billing_finalization_coordinator', 'consumerOutcome', 'string', false),
        ('billing_settlement_catch_up', 'consumerOutcome', 'string', false),
        ('broker_publication', 'stream', 'string', true),
        ('broker_publication', 'sequence', 'integer', true),
        ('broker_publication', 'duplicate', 'boolean', true)
       ) AS m(receipt_kind, member, json_type, required) ON m.receipt_kind = k.receipt_kind;
-- Kinds other than operations_projection may name a projection target and the event's type.
INSERT INTO outbox.receipt_kind_members (receipt_kind, member, json_type, required)
SELECT k.receipt_kind, m.member, m.json_type, false
  FROM outbox.receipt_kinds AS k
 CROSS JOIN (VALUES ('projectionName', 'string'), ('projectionVersion', 'integer'),
                    ('eventType', 'string'), ('eventSchemaVersion', 'string')) AS m(member, json_type)
 WHERE k.receipt_kind IN ('metering_input_processor', 'billing_finalization_coordinator', 'billing_settlement_catch_up');
GRANT SELECT ON outbox.receipt_kind_members TO outbox_auditor;

-- outbox._jcs_text_problem(p_text text) RETURNS text  (private, SPEC D-2 "the hot path accepts
--   exactly what the slow path accepts")
-- Purpose: decide whether a caller-supplied canonical text is exactly the RFC 8785 (JCS) form of
--   a document the slow path (outbox.jcs_canonicalize) accepts. Returns NULL when it is, else a
--   short problem description (never document content). Never raises.
-- How: cheap whole-text checks, no per-character or per-member PL/pgSQL loop:
--   1. p_text::json — the text is JSON at all (the json input function only validates).
--   2. One regular expression over the whole text (a DFA scan) that accepts exactly the
--      canonical tokens: no insignificant whitespace; numbers 0 or -?[1-9][0-9]* with at most
--      16 digits (no fraction, exponent, -0 or leading zero); strings with only the JCS escapes
--      (\" \\ \b \f \n \r \t, and \u00xx in lower-case hex for the other control characters;
--      everything else literal — so \u0000 and surrogate escapes, which the slow path refuses,
--      are refused as well). The same pass also requires what step 3 needs — member names with
--      no brace and no character in U+E000..U+FFFF, and no string that starts with a colon (so a
--      quote followed by a colon always ends a member name); a text whose tokens are canonical
--      but that fails only this part goes to the fallback (4).
--   3. On a copy of the text in which every object becomes the array
--      [1.5, name1, value1, name2, value2, ...] (replace() of the structural characters; 1.5
--      cannot occur in a canonical text, so it marks former objects), parsed as jsonb — which
--      keeps the text's member order, since jsonb keeps array order — jsonpath checks:
--      numbers against 2^53-1 (only when the text has a 16-digit run at all); depth, at most 64
--      nested containers as in outbox._jcs_value; and the member names of every former object,
--      pairwise (strict mode: a name past the end is "unknown", never a match). jsonpath
--      compares strings by code point, which is RFC 8785's UTF-16 code-unit order unless a name
--      holds a character in U+E000..U+FFFF (excluded in 2); strictly increasing names also rule
--      out duplicates. Escaped quotes and backslashes are first rewritten as \u0022 / \u005c
--      (the same strings), so the replacements hit only structure and the ends of member names
--      (a quote followed by a colon, given step 2);
--      braces in member names are excluded in 2, braces in string values only change values
--      the check never compares.
--   4. The full canonicalizer (outbox.jcs_canonicalize) decides only when a cheap check cannot:
--      a member name with a brace or a character in U+E000..U+FFFF, a string starting with a
--      colon, or an object with more than 64 members.
-- Attributes: IMMUTABLE (a function of the text alone), PARALLEL UNSAFE (its EXCEPTION block
--   starts a subtransaction, like outbox.jcs_canonicalize).
-- Caller: the hot paths of append_event/append_events (outbox._append_validate), and of the
--   receipt checks; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._jcs_text_problem(p_text text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- The two expressions of step 2, each one literal (no per-call concatenation). Their parts:
    --   escape  \\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f]))  the JCS escapes: \" \\ \b \f \n \r \t, and
    --           \u00xx (lower case) for the other control characters
    --   number  (?:0|-?[1-9][0-9]{0,15})(?![0-9])  canonical integers, at most 16 digits (16-digit
    --           ones are compared with 2^53-1 in step 3), never followed by another digit
    --   c_tokens      structure [{}[\],:], strings "(?:[^"\\]|escape)*", number, true, false, null
    --   c_comparable  the same, but a colon only as the end of a member name
    --                 "(?:(?:[^"\\{}:\uE000-\uFFFF]|escape)(?:[^"\\{}\uE000-\uFFFF]|escape)*)?": and other
    --                 strings "(?:(?:[^"\\:]|escape)(?:[^"\\]|escape)*)?" (no brace or U+E000..U+FFFF in a
    --                 name, no string starting with a colon)
    c_tokens constant text := '^(?:[{}[\],:]|"(?:[^"\\]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))*"|(?:0|-?[1-9][0-9]{0,15})(?![0-9])|true|false|null)*$';
    c_comparable constant text := '^(?:[{}[\],]|"(?:(?:[^"\\{}:\uE000-\uFFFF]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))(?:[^"\\{}\uE000-\uFFFF]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))*)?":|"(?:(?:[^"\\:]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))(?:[^"\\]|\\(?:["\\bfnrt]|u00(?:0[1-7bef]|1[0-9a-f])))*)?"|(?:0|-?[1-9][0-9]{0,15})(?![0-9])|true|false|null)*$';
    v_json json;
    v_text text := p_text;
    v_copy jsonb;
    v_size integer;
BEGIN
    IF p_text IS NULL THEN
        RETURN 'canonical text is NULL';
    END IF;
    v_json := p_text::json;

    IF p_text !~ c_comparable THEN
        IF p_text !~ c_tokens THEN
            RETURN 'not RFC 8785 canonical: insignificant whitespace, a non-canonical number or string escape, or a number that is not an integer with |n| <= 2^53-1';
        END IF;
        -- canonical tokens, but a member name the order check cannot compare: fallback below
    ELSE
        IF pg_catalog.strpos(v_text, '\') > 0 THEN
            v_text := pg_catalog.replace(pg_catalog.replace(v_text, '\\', '\u005c'), '\"', '\u0022');
        END IF;
        IF pg_catalog.strpos(v_text, '{}') > 0 THEN
            v_text := pg_catalog.replace(v_text, '{}', '[1.5]');
        END IF;
        v_copy := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                      v_text, '{', '[1.5,'), '}', ']'), '":', '",')::jsonb;

        IF p_text ~ '[0-9]{16}'
           AND pg_catalog.jsonb_path_exists(v_copy,
                   'strict $.** ? (@.type() == "number" && (@ > 9007199254740991 || @ < -9007199254740991))') THEN
            RETURN 'a number outside the safe integer range |n| <= 2^53-1';
        END IF;
        IF pg_catalog.jsonb_path_exists(v_copy, 'strict $.**{64} ? (@.type() == "array")') THEN
            RETURN 'nested deeper than 64 levels';
        END IF;

        -- The first former object whose names are not strictly increasing (names 1..64), or that
        -- has more than 64 members; its size tells which.
        v_size := pg_catalog.jsonb_path_query_first(v_copy,
            'strict $.** ? (@[0] == 1.5 && (
            @[1] >= @[3] || @.size() > 6 && (@[3] >= @[5] || @.size() > 8 && (@[5] >= @[7] ||
            @.size() > 10 && (@[7] >= @[9] || @.size() > 12 && (@[9] >= @[11] ||
            @.size() > 14 && (@[11] >= @[13] || @.size() > 16 && (@[13] >= @[15] ||
            @.size() > 18 && (@[15] >= @[17] || @.size() > 20 && (@[17] >= @[19] ||
            @.size() > 22 && (@[19] >= @[21] || @.size() > 24 && (@[21] >= @[23] ||
            @.size() > 26 && (@[23] >= @[25] || @.size() > 28 && (@[25] >= @[27] ||
            @.size() > 30 && (@[27] >= @[29] || @.size() > 32 && (@[29] >= @[31] ||
            @.size() > 34 && (@[31] >= @[33] || @.size() > 36 && (@[33] >= @[35] ||
            @.size() > 38 && (@[35] >= @[37] || @.size() > 40 && (@[37] >= @[39] ||
            @.size() > 42 && (@[39] >= @[41] || @.size() > 44 && (@[41] >= @[43] ||
            @.size() > 46 && (@[43] >= @[45] || @.size() > 48 && (@[45] >= @[47] ||
            @.size() > 50 && (@[47] >= @[49] || @.size() > 52 && (@[49] >= @[51] ||
            @.size() > 54 && (@[51] >= @[53] || @.size() > 56 && (@[53] >= @[55] ||
            @.size() > 58 && (@[55] >= @[57] || @.size() > 60 && (@[57] >= @[59] ||
            @.size() > 62 && (@[59] >= @[61] || @.size() > 64 && (@[61] >= @[63] ||
            @.size() > 66 && (@[63] >= @[65] || @.size() > 68 && (@[65] >= @[67] ||
            @.size() > 70 && (@[67] >= @[69] || @.size() > 72 && (@[69] >= @[71] ||
            @.size() > 74 && (@[71] >= @[73] || @.size() > 76 && (@[73] >= @[75] ||
            @.size() > 78 && (@[75] >= @[77] || @.size() > 80 && (@[77] >= @[79] ||
            @.size() > 82 && (@[79] >= @[81] || @.size() > 84 && (@[81] >= @[83] ||
            @.size() > 86 && (@[83] >= @[85] || @.size() > 88 && (@[85] >= @[87] ||
            @.size() > 90 && (@[87] >= @[89] || @.size() > 92 && (@[89] >= @[91] ||
            @.size() > 94 && (@[91] >= @[93] || @.size() > 96 && (@[93] >= @[95] ||
            @.size() > 98 && (@[95] >= @[97] || @.size() > 100 && (@[97] >= @[99] ||
            @.size() > 102 && (@[99] >= @[101] || @.size() > 104 && (@[101] >= @[103] ||
            @.size() > 106 && (@[103] >= @[105] || @.size() > 108 && (@[105] >= @[107] ||
            @.size() > 110 && (@[107] >= @[109] || @.size() > 112 && (@[109] >= @[111] ||
            @.size() > 114 && (@[111] >= @[113] || @.size() > 116 && (@[113] >= @[115] ||
            @.size() > 118 && (@[115] >= @[117] || @.size() > 120 && (@[117] >= @[119] ||
            @.size() > 122 && (@[119] >= @[121] || @.size() > 124 && (@[121] >= @[123] ||
            @.size() > 126 && (@[123] >= @[125] || @.size() > 128 && (@[125] >= @[127] ||
            @.size() > 129)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))).size()')::integer;
        IF v_size IS NULL THEN
            RETURN NULL;
        ELSIF v_size <= 129 THEN
            RETURN 'member names not in RFC 8785 order, or a duplicate member name';
        END IF;
        -- an object with more than 64 members: fallback below
    END IF;

    -- Fallback: the full canonicalizer decides.
    IF outbox.jcs_canonicalize(v_json) IS DISTINCT FROM p_text THEN
        RETURN 'not the RFC 8785 canonical form of its document';
    END IF;
    RETURN NULL;
EXCEPTION
    WHEN SQLSTATE 'OB201' THEN
        RETURN 'not canonicalizable under jcs-sha256-v1 (duplicate member name, a number that is not an integer with |n| <= 2^53-1, \u0000 or an unpaired surrogate, or nesting deeper than 64)';
    WHEN invalid_text_representation OR statement_too_complex OR program_limit_exceeded THEN
        RETURN 'not JSON';
END
$fn$;

COMMENT ON FUNCTION outbox._jcs_text_problem(text) IS
    'Private: NULL when the text is exactly the RFC 8785 canonical form of a document the slow path accepts, else a problem (SPEC D-2). Cheap whole-text checks (regex, jsonpath); the full canonicalizer only when they cannot decide.';
REVOKE ALL ON FUNCTION outbox._jcs_text_problem(text) FROM PUBLIC;


-- §2 publication table: the event row is written once and never updated; published_at lives in
-- a narrow table written only by the publication function (trigger: OB202 for everyone else).
-- No foreign key to outbox_events: the insert trigger already requires every new row's event to
-- have its deliveries all acknowledged (deliveries reference their event), which implies the
-- event exists; a foreign key would add one lookup per published event for nothing.
CREATE TABLE outbox.outbox_publications (
    event_id     uuid PRIMARY KEY,
    published_at timestamptz NOT NULL
);
COMMENT ON TABLE outbox.outbox_publications IS
    'One row per published event (SPEC §2, R-AK-4): inserted once by the publication function when every mandatory delivery is acknowledged; never updated or deleted.';
INSERT INTO outbox.outbox_publications (event_id, published_at)
SELECT e.event_id, e.published_at FROM outbox.outbox_events AS e WHERE e.published_at IS NOT NULL;
DROP TRIGGER tg_outbox_events__immutable ON outbox.outbox_events;
DROP TRIGGER tg_outbox_events__no_truncate ON outbox.outbox_events;
DROP FUNCTION outbox.tg_outbox_events__immutable();
DROP INDEX outbox.outbox_events_unpublished;
ALTER TABLE outbox.outbox_events DROP COLUMN published_at;
-- Event immutability (SPEC R-SEC-3, R-AK-4, §2): no column of an event ever changes (the event
-- row is written once; its publication lives in outbox.outbox_publications). An UPDATE that
-- changes a column, DELETE and TRUNCATE raise OB202 (retention is a later, audited procedure).
CREATE FUNCTION outbox.tg_outbox_events__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (NEW.event_id, NEW.event_type, NEW.schema_version, NEW.delivery_set_version,
            NEW.delivery_set_definition_schema_version, NEW.delivery_set_definition_digest_algorithm_version,
            NEW.delivery_set_definition_digest, NEW.aggregate_id, NEW.aggregate_revision, NEW.tenant_kind,
            NEW.tenant_id, NEW.workspace_id, NEW.project_id, NEW.correlation_id, NEW.causation_id,
            NEW.operation_id, NEW.event_payload, NEW.event_envelope_digest_algorithm_version,
            NEW.event_envelope_sha256, NEW.occurred_at, NEW.created_at, NEW.event_envelope_canonical)
           IS DISTINCT FROM
           (OLD.event_id, OLD.event_type, OLD.schema_version, OLD.delivery_set_version,
            OLD.delivery_set_definition_schema_version, OLD.delivery_set_definition_digest_algorithm_version,
            OLD.delivery_set_definition_digest, OLD.aggregate_id, OLD.aggregate_revision, OLD.tenant_kind,
            OLD.tenant_id, OLD.workspace_id, OLD.project_id, OLD.correlation_id, OLD.causation_id,
            OLD.operation_id, OLD.event_payload, OLD.event_envelope_digest_algorithm_version,
            OLD.event_envelope_sha256, OLD.occurred_at, OLD.created_at, OLD.event_envelope_canonical) THEN
            RAISE EXCEPTION 'immutability violation: event columns never change'
                USING ERRCODE = 'OB202', DETAIL = format('event %s', OLD.event_id);
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.outbox_events is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'events are immutable; only the audited retention procedure may archive them';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_events__immutable() FROM PUBLIC;

CREATE TRIGGER tg_outbox_events__immutable BEFORE UPDATE OR DELETE ON outbox.outbox_events
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_events__immutable();
CREATE TRIGGER tg_outbox_events__no_truncate BEFORE TRUNCATE ON outbox.outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_events__immutable();

-- Publications (SPEC §2 publication table, R-AK-4, T-5): one row per published event, inserted
-- once by the publication function (outbox._publish_events) and never changed. Nobody, the
-- owner included, may insert a publication outside that function or for an event with a
-- mandatory delivery that is not acknowledged, nor update, delete or truncate one: OB202.
-- INSERT: a statement-level check over the new rows (one query per publishing statement):
--   the transaction-local setting pgoutbox.publishing must be 'on' (set by the function around
--   its INSERT) AND every new row's event must have all mandatory deliveries acknowledged, so
--   even a forged setting cannot publish an incomplete event.
CREATE FUNCTION outbox.tg_outbox_publications__guarded() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_event uuid;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF coalesce(current_setting('pgoutbox.publishing', true), '') <> 'on' THEN
            RAISE EXCEPTION 'immutability violation: publications are written by the publication function only'
                USING ERRCODE = 'OB202', DETAIL = 'insert into outbox.outbox_publications outside outbox._publish_events';
        END IF;
        SELECT n.event_id INTO v_event
          FROM new_publications AS n
         WHERE EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                        WHERE d.event_id = n.event_id AND d.mandatory AND d.status <> 'acknowledged')
            OR NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d WHERE d.event_id = n.event_id)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'immutability violation: event % is not fully acknowledged', v_event
                USING ERRCODE = 'OB202', DETAIL = 'a publication needs every mandatory delivery of its event acknowledged';
        END IF;
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.outbox_publications is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'published_at is set once, by the publication function only';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_publications__guarded() FROM PUBLIC;

CREATE TRIGGER tg_outbox_publications__guarded_insert AFTER INSERT ON outbox.outbox_publications
    REFERENCING NEW TABLE AS new_publications
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE TRIGGER tg_outbox_publications__guarded BEFORE UPDATE OR DELETE ON outbox.outbox_publications
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE TRIGGER tg_outbox_publications__no_truncate BEFORE TRUNCATE ON outbox.outbox_publications
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();

GRANT SELECT ON outbox.outbox_publications TO outbox_auditor;

-- append_event stores the canonical text it verified (hot path) or computed (slow path).
DROP FUNCTION outbox.append_event(json, text, text);
-- outbox.append_event(event json, canonical_text text DEFAULT NULL, event_envelope_sha256 text DEFAULT NULL)
-- Purpose: append one EventEnvelope@1 inside the caller's business transaction (SPEC §3.2): the
--   envelope is validated (D-3, R-AP-7, payload size limit), the ACTIVE delivery-set definition's
--   quartet is frozen on the event (R-AP-1, R-AP-2), the envelope and its jcs-sha256-v1 digest
--   are stored with the canonical text (R-AP-3, D-2), one pending delivery per mandatory member
--   is created (R-AP-4) and channel outbox_delivery is notified once per destination (delivered
--   on COMMIT). The deferred constraint triggers prove the delivery set at COMMIT (R-AP-5).
--   eventId and occurredAt may be omitted (generated) unless the canonical text is passed.
-- One rule set: this is outbox.append_events called with a one-element array; every check lives
--   there and in outbox._append_validate (see their headers for the full list and order).
-- Digest paths (D-2): without canonical_text the database canonicalizes the envelope itself;
--   with canonical_text and its digest (the producer library's hot path) the database checks
--   sha256(canonical_text) = digest, that the text is exactly the RFC 8785 form of a document the
--   slow path accepts (cheap checks, outbox._jcs_text_problem), and that it is the submitted
--   envelope; the full canonical re-check also runs in outbox.verify_event_digests(). Either way
--   the database never stores a digest it did not verify.
-- Idempotence: the same eventId appended again with the same digest returns the stored row
--   (nothing new is written); the same eventId with another digest is refused (OB105).
-- Limits: an event document larger than outbox.kernel_settings max_payload_bytes (default 1 MiB,
--   changed by the owner only) -> OB105.
-- Raises: OB103 no active definition / pair not applicable / no mandatory member;
--   OB105 envelope invalid (missing/unknown field, wrong type, refinement, size, caller digest
--   differs); OB201 not canonicalizable (duplicate key, unsafe number, nesting; on the hot path
--   also a canonical text that is not exactly canonical: whitespace, escapes, number forms,
--   member order).
-- Caller: outbox_producer.
CREATE FUNCTION outbox.append_event(
    p_event json,
    p_canonical_text text DEFAULT NULL,
    p_event_envelope_sha256 text DEFAULT NULL
) RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT a.event_id, a.event_envelope_sha256, a.delivery_count
      FROM outbox.append_events(pg_catalog.json_build_array(p_event),
                                ARRAY[p_canonical_text], ARRAY[p_event_envelope_sha256]) AS a;
END
$fn$;

COMMENT ON FUNCTION outbox.append_event(json, text, text) IS
    'Append an EventEnvelope@1 with its frozen delivery set and pending deliveries: append_events with one element (SPEC §3.2, D-2). Raises OB103, OB105, OB201. Caller: outbox_producer.';
REVOKE ALL ON FUNCTION outbox.append_event(json, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_event(json, text, text) TO outbox_producer;


-- D-2 audit: the acknowledged finish keeps the receipt body the ack was checked against, so
-- outbox.verify_ack_digests can re-canonicalize what the hot path trusted.
ALTER TABLE outbox.outbox_delivery_attempt_finishes ADD COLUMN receipt json;

-- Write amplification (P-4): one partial index over non-terminal rows serves both the
-- per_aggregate ordering check (R-CL-7) and the stats scrape (R-DP-4), instead of two, so a
-- claim or a retry inserts one index entry less.
DROP INDEX outbox.outbox_deliveries_stats_nonterminal;
DROP INDEX outbox.outbox_deliveries_open_by_aggregate;
CREATE INDEX outbox_deliveries_open
    ON outbox.outbox_deliveries (destination, aggregate_id, aggregate_revision)
    INCLUDE (status, created_at, last_error_code)
    WHERE status IN ('pending', 'leased');
-- R-AK-5: delivery_stats also reports the oldest open revision gap per destination.
DROP FUNCTION outbox.delivery_stats();
-- outbox.delivery_stats() RETURNS TABLE (...)  (public, SPEC R-DP-4)
-- Purpose: cheap per-destination backlog figures for the dispatcher's metrics and readiness:
--   pending and leased counts, the oldest non-terminal delivery (pending or leased, i.e. not yet
--   delivered) and its age, unresolved quarantines, and the oldest open revision gap: the age
--   of the oldest non-terminal delivery whose last outcome was awaiting_revision (R-AK-5: such
--   a delivery never exhausts, so its wait must stay visible). One row per registered destination,
--   zeros when it has no work.
-- Cost: reads only non-terminal rows through the partial index
--   outbox_deliveries_open (status IN ('pending','leased'), with status, created_at and
--   last_error_code included), so a scrape costs
--   O(backlog), never O(history); acknowledged totals are deliberately not computed here (use the
--   outbox.delivery_status view, an operator read). Unresolved quarantines are counted from
--   outbox_quarantine, which stays small by design (every row is an open case).
-- Time: now() (the statement's transaction start), so every row of one call shares one clock.
-- Locking: none (plain MVCC reads); no fencing (read-only).
-- SQLSTATEs: none of its own.
-- Callers: outbox_dispatcher (metrics, start-up preflight), outbox_auditor.
CREATE FUNCTION outbox.delivery_stats()
RETURNS TABLE (
    destination                text,
    consumer_name              text,
    receipt_kind               text,
    pending_count              bigint,
    leased_count               bigint,
    oldest_pending_at          timestamptz,
    oldest_pending_age_seconds double precision,
    quarantined_unresolved     bigint,
    oldest_gap_age_seconds     double precision
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    WITH v_work AS (
        SELECT d.destination AS v_destination,
               count(*) FILTER (WHERE d.status = 'pending') AS v_pending,
               count(*) FILTER (WHERE d.status = 'leased')  AS v_leased,
               min(d.created_at)                            AS v_oldest,
               min(d.created_at) FILTER (WHERE d.last_error_code = 'awaiting_revision') AS v_oldest_gap
        FROM outbox.outbox_deliveries d
        WHERE d.status IN ('pending', 'leased')
        GROUP BY d.destination
    ), v_quarantine AS (
        SELECT q.destination AS v_destination, count(*) AS v_open
        FROM outbox.outbox_quarantine q
        WHERE q.acknowledged_at IS NULL
        GROUP BY q.destination
    )
    SELECT dd.destination,
           dd.consumer_name,
           dd.receipt_kind,
           COALESCE(w.v_pending, 0)::bigint,
           COALESCE(w.v_leased, 0)::bigint,
           w.v_oldest,
           COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - w.v_oldest)), 0), 0)::double precision,
           COALESCE(qq.v_open, 0)::bigint,
           COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - w.v_oldest_gap)), 0), 0)::double precision
    FROM outbox.delivery_destinations dd
    LEFT JOIN v_work w ON w.v_destination = dd.destination
    LEFT JOIN v_quarantine qq ON qq.v_destination = dd.destination
    ORDER BY dd.destination;
END
$fn$;

COMMENT ON FUNCTION outbox.delivery_stats() IS
    'Per-destination pending/leased counts, oldest undelivered age and open quarantines, from non-terminal rows only (cheap per scrape). SPEC R-DP-4. Callers: outbox_dispatcher, outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.delivery_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.delivery_stats() TO outbox_dispatcher, outbox_auditor;


CREATE OR REPLACE VIEW outbox.delivery_status AS
SELECT dd.destination,
       dd.consumer_name,
       count(d.event_id) FILTER (WHERE d.status = 'pending')      AS pending,
       count(d.event_id) FILTER (WHERE d.status = 'leased')       AS leased,
       count(d.event_id) FILTER (WHERE d.status = 'acknowledged') AS acknowledged,
       count(d.event_id) FILTER (WHERE d.status = 'quarantined')  AS quarantined,
       min(d.created_at) FILTER (WHERE d.status IN ('pending', 'leased')) AS oldest_pending_at,
       COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - min(d.created_at) FILTER (WHERE d.status IN ('pending', 'leased')))), 0), 0)::double precision
           AS oldest_pending_age_seconds,
       COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - min(d.created_at) FILTER (
                    WHERE d.status IN ('pending', 'leased') AND d.last_error_code = 'awaiting_revision'))), 0), 0)::double precision
           AS oldest_gap_age_seconds
FROM outbox.delivery_destinations dd
LEFT JOIN outbox.outbox_deliveries d ON d.destination = dd.destination
GROUP BY dd.destination, dd.consumer_name;
COMMENT ON VIEW outbox.delivery_status IS
    'Per-destination pending/leased/acknowledged/quarantined counts, oldest undelivered age and oldest open revision gap age (R-AK-5) (operator read, outboxctl status). Read-only.';

-- P-4: the deliveries' immutability trigger fires only for a violating update (WHEN clause).
-- (CASCADE drops exactly the triggers that use this function: immutable, no_truncate and, where
-- 005 already installed this file's version, no_delete)
DROP FUNCTION outbox.tg_outbox_deliveries__immutable() CASCADE;
-- Delivery immutability (SPEC R-SEC-3): the frozen columns of a delivery (what the delivery
-- set decided when the event was appended) never change, terminal states never change, rows are
-- never deleted. Lease/attempt/ack columns move only through the dispatch functions.
CREATE FUNCTION outbox.tg_outbox_deliveries__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (NEW.destination, NEW.event_id, NEW.delivery_set_version, NEW.consumer_name, NEW.expected_receipt_type,
            NEW.expected_receipt_schema_version, NEW.required_projection_name, NEW.required_projection_version,
            NEW.mandatory, NEW.aggregate_id, NEW.aggregate_revision, NEW.created_at)
           IS DISTINCT FROM
           (OLD.destination, OLD.event_id, OLD.delivery_set_version, OLD.consumer_name, OLD.expected_receipt_type,
            OLD.expected_receipt_schema_version, OLD.required_projection_name, OLD.required_projection_version,
            OLD.mandatory, OLD.aggregate_id, OLD.aggregate_revision, OLD.created_at) THEN
            RAISE EXCEPTION 'immutability violation: frozen delivery columns never change'
                USING ERRCODE = 'OB202', DETAIL = format('delivery %s/%s', OLD.destination, OLD.event_id);
        END IF;
        IF OLD.status IN ('acknowledged', 'quarantined') AND NEW IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'immutability violation: terminal deliveries never change'
                USING ERRCODE = 'OB202', DETAIL = format('delivery %s/%s is %s', OLD.destination, OLD.event_id, OLD.status);
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.outbox_deliveries is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'deliveries are never deleted; quarantine is a state';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_deliveries__immutable() FROM PUBLIC;

-- UPDATE: the WHEN clause (evaluated by the executor, no PL/pgSQL call) lets through every
-- update that keeps the frozen columns and does not touch a terminal row - the dispatch hot
-- path - and runs the function, which raises, only for a violation (P-4: no per-row function
-- call on claims and outcomes).
CREATE TRIGGER tg_outbox_deliveries__immutable BEFORE UPDATE ON outbox.outbox_deliveries
    FOR EACH ROW
    WHEN ((NEW.destination, NEW.event_id, NEW.delivery_set_version, NEW.consumer_name, NEW.expected_receipt_type,
           NEW.expected_receipt_schema_version, NEW.required_projection_name, NEW.required_projection_version,
           NEW.mandatory, NEW.aggregate_id, NEW.aggregate_revision, NEW.created_at)
          IS DISTINCT FROM
          (OLD.destination, OLD.event_id, OLD.delivery_set_version, OLD.consumer_name, OLD.expected_receipt_type,
           OLD.expected_receipt_schema_version, OLD.required_projection_name, OLD.required_projection_version,
           OLD.mandatory, OLD.aggregate_id, OLD.aggregate_revision, OLD.created_at)
          OR (OLD.status IN ('acknowledged', 'quarantined') AND NEW.* IS DISTINCT FROM OLD.*))
    EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();
CREATE TRIGGER tg_outbox_deliveries__no_delete BEFORE DELETE ON outbox.outbox_deliveries
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();
CREATE TRIGGER tg_outbox_deliveries__no_truncate BEFORE TRUNCATE ON outbox.outbox_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();


-- R-AK-9: batch outcome functions; the one-row functions become batches of one (one rule each).
DROP FUNCTION IF EXISTS outbox.ack_delivery(text, uuid, uuid, uuid, json, json);
DROP FUNCTION IF EXISTS outbox.ack_delivery(text, uuid, uuid, uuid, json, json, text);
DROP FUNCTION IF EXISTS outbox.retry_delivery(text, uuid, uuid, uuid, text, text);
DROP FUNCTION IF EXISTS outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text);
DROP FUNCTION IF EXISTS outbox._ack_validate(outbox.outbox_deliveries, outbox.outbox_events, json, json);
DROP FUNCTION IF EXISTS outbox._publish_event(uuid);
DROP FUNCTION IF EXISTS outbox._dispatch_quarantine(outbox.outbox_deliveries, text, text, text, text, timestamptz);
DROP FUNCTION IF EXISTS outbox._ack_reject(text);
DROP FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamptz);
DROP FUNCTION outbox._dispatch_recover(text[], integer, timestamptz);
DROP FUNCTION IF EXISTS outbox.claim_deliveries(text, text[], integer, interval);
DROP FUNCTION IF EXISTS outbox.claim_deliveries(text, text[], integer, interval, text);
-- outbox._fence_problem(p_delivery outbox.outbox_deliveries, p_destination text, p_event_id uuid,
--                       p_attempt_id uuid, p_lease_token uuid, p_now timestamptz) RETURNS text
-- (private, SPEC R-CL-3)
-- Purpose: THE fencing rule of every outcome (ack, retry, quarantine, renew; one row or a batch):
--   NULL when p_delivery (the row of destination/event, locked by the caller; NULL when there is
--   none) is leased to p_attempt_id with p_lease_token and the lease is live at p_now; else the
--   cause as a DETAIL for OB001: incomplete fence, unknown delivery, not leased, stale attempt,
--   wrong token, expired lease.
-- Time: p_now is the caller's clock_timestamp() captured once per call.
-- Caller: the dispatch functions (running as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._fence_problem(p_delivery outbox.outbox_deliveries, p_destination text, p_event_id uuid,
                                      p_attempt_id uuid, p_lease_token uuid, p_now timestamptz)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $fn$
    SELECT CASE
        WHEN p_destination IS NULL OR p_event_id IS NULL OR p_attempt_id IS NULL OR p_lease_token IS NULL
            THEN 'incomplete fence: destination, event_id, attempt_id and lease_token are all required'
        WHEN p_delivery.destination IS NULL
            THEN pg_catalog.format('no delivery for destination %s and event %s', p_destination, p_event_id)
        WHEN p_delivery.status <> 'leased'
            THEN pg_catalog.format('delivery %s/%s is %s', p_destination, p_event_id, p_delivery.status)
        WHEN p_delivery.current_attempt_id IS DISTINCT FROM p_attempt_id
            THEN pg_catalog.format('attempt %s is not the current attempt of delivery %s/%s', p_attempt_id, p_destination, p_event_id)
        WHEN p_delivery.lease_token IS DISTINCT FROM p_lease_token
            THEN pg_catalog.format('lease token does not match the current lease of delivery %s/%s', p_destination, p_event_id)
        WHEN p_delivery.lease_expires_at <= p_now
            THEN pg_catalog.format('lease of delivery %s/%s expired at %s', p_destination, p_event_id, p_delivery.lease_expires_at)
    END
$fn$;

COMMENT ON FUNCTION outbox._fence_problem(outbox.outbox_deliveries, text, uuid, uuid, uuid, timestamptz) IS
    'Private: NULL when destination+event+current attempt+token+live lease hold, else the OB001 cause (SPEC R-CL-3).';
REVOKE ALL ON FUNCTION outbox._fence_problem(outbox.outbox_deliveries, text, uuid, uuid, uuid, timestamptz) FROM PUBLIC;

-- outbox._dispatch_fence(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                        p_now timestamptz) RETURNS outbox.outbox_deliveries  (private, SPEC R-CL-3)
-- Purpose: the fencing check of renew_lease (the outcome functions apply the same rule,
--   outbox._fence_problem, to every item of a batch). Locks the delivery row (FOR UPDATE, waiting: a concurrent recovery or
--   claim of the same row finishes first and we then see its committed state) and returns it
--   only when it is leased, its current attempt is p_attempt_id, its token is p_lease_token and
--   the lease is still live at p_now (lease_expires_at > p_now).
-- Time: p_now is the caller's clock_timestamp() captured once per call (not the transaction
--   start), so a caller holding a transaction open cannot stretch a lease.
-- SQLSTATEs: OB001 with a distinct DETAIL per cause (incomplete fence, unknown delivery, not
--   leased, stale attempt, wrong token, expired lease). Nothing is changed by this function.
-- Caller: the dispatch functions above (running as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._dispatch_fence(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                       p_lease_token uuid, p_now timestamptz)
RETURNS outbox.outbox_deliveries
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_d       outbox.outbox_deliveries;
    v_problem text;
BEGIN
    SELECT d.* INTO v_d
      FROM outbox.outbox_deliveries AS d
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       FOR UPDATE;
    v_problem := outbox._fence_problem(v_d, p_destination, p_event_id, p_attempt_id, p_lease_token, p_now);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'fencing rejected' USING ERRCODE = 'OB001', DETAIL = v_problem;
    END IF;
    RETURN v_d;
END
$fn$;

COMMENT ON FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamptz) IS
    'Private: lock a delivery and check destination+event+current attempt+token+live lease, else OB001 (SPEC R-CL-3).';
REVOKE ALL ON FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamptz) FROM PUBLIC;

-- outbox._quarantine_write(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[],
--                          p_outcome text, p_reasons text[], p_error_codes text[], p_error_refs text[],
--                          p_now timestamptz) RETURNS integer  (private, SPEC R-AK-5, R-AK-6)
-- Purpose: THE quarantine write, set-based, for deliveries the caller has locked and fenced
--   (quarantine_deliveries, retry_deliveries on exhaustion, recovery of a lease that expired on
--   the last allowed attempt): in one statement append the finish of the current attempt
--   (outcome p_outcome, disposition quarantined), set the delivery terminal quarantined with the
--   lease cleared, and insert the quarantine row with the event digest. Arrays are parallel.
--   Returns the number of deliveries quarantined.
-- Caller: the dispatch functions (running as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._quarantine_write(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[],
                                         p_outcome text, p_reasons text[], p_error_codes text[],
                                         p_error_refs text[], p_now timestamptz)
RETURNS integer
LANGUAGE sql
VOLATILE
AS $fn$
    WITH q AS (
        SELECT u.destination, u.event_id, u.attempt_id, u.reason, u.error_code, u.error_ref
          FROM unnest(p_destinations, p_event_ids, p_attempt_ids, p_reasons, p_error_codes, p_error_refs)
               AS u(destination, event_id, attempt_id, reason, error_code, error_ref)
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
        SELECT q.attempt_id, p_now, p_outcome, 'quarantined', q.error_code, q.error_ref
          FROM q
        RETURNING attempt_id
    ), moved AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status           = 'quarantined',
               lease_owner      = NULL,
               lease_token      = NULL,
               lease_expires_at = NULL,
               last_error_code  = q.error_code,
               last_error_ref   = q.error_ref
          FROM q
         WHERE d.destination = q.destination AND d.event_id = q.event_id
           AND d.status = 'leased' AND d.current_attempt_id = q.attempt_id
        RETURNING d.event_id
    ), recorded AS (
        INSERT INTO outbox.outbox_quarantine
               (destination, event_id, attempt_id, reason, event_envelope_digest_algorithm_version,
                event_envelope_sha256, quarantined_at)
        SELECT q.destination, e.event_id, q.attempt_id, q.reason,
               e.event_envelope_digest_algorithm_version, e.event_envelope_sha256, p_now
          FROM q
          JOIN outbox.outbox_events AS e ON e.event_id = q.event_id
        RETURNING event_id
    )
    SELECT pg_catalog.count(*)::integer FROM moved
$fn$;

COMMENT ON FUNCTION outbox._quarantine_write(text[], uuid[], uuid[], text, text[], text[], text[], timestamptz) IS
    'Private: set-based quarantine of locked, fenced deliveries - finish, terminal state, quarantine row (SPEC R-AK-5, R-AK-6).';
REVOKE ALL ON FUNCTION outbox._quarantine_write(text[], uuid[], uuid[], text, text[], text[], text[], timestamptz) FROM PUBLIC;

-- outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamptz)
-- RETURNS integer  (private, SPEC R-CL-2, R-AK-8)
-- Purpose: lease-expiry recovery in ONE statement. For up to p_max_rows leased deliveries whose
--   lease expired at p_now (all destinations when p_destinations is NULL): append the finish
--   outcome=lease_expired_unknown / retry_disposition=reclaimable to the open attempt (only if it
--   has none: ON CONFLICT on the finishes' primary key), and move the delivery back to pending
--   with available_at = p_now and the lease columns cleared. A delivery whose lease expired on
--   its last allowed attempt (attempt_count >= the destination's max_attempts) is quarantined
--   instead (reason retry_exhausted, finish lease_expired_unknown/quarantined): a delivery that
--   kills or stalls its dispatcher every time ends visibly in quarantine, never reclaimed
--   forever (SPEC R-AK-5). Returns how many attempts it closed.
-- Locking: FOR UPDATE SKIP LOCKED on the delivery rows, so it never waits for a worker that is
--   acknowledging/retrying its row right now (that worker holds the row lock; if it commits
--   first its fence succeeded and the row is no longer leased; if we lock first its fence then
--   sees a pending row and fails with OB001). Never two finishes for one start (PK).
-- Index: outbox_deliveries_leased (lease_expires_at) WHERE status = 'leased' - the leased set is
--   bounded by concurrency x batch, never by the backlog. The UPDATE finds the locked rows by
--   ctid (TID scan; they are locked by this transaction), so no plan can join the backlog.
-- SQLSTATEs: none of its own.
-- Caller: outbox.recover_expired_leases and outbox.claim_deliveries; granted to nobody.
CREATE FUNCTION outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamptz)
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
          JOIN outbox.outbox_retry_policies AS p ON p.destination = d.destination
         WHERE d.status = 'leased'
           AND d.lease_expires_at <= p_now
           AND (p_destinations IS NULL OR d.destination = ANY (p_destinations))
           AND d.attempt_count >= p.max_attempts
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

-- outbox._batch_items(p_items json, p_call text, p_keys text[], p_required text[])
-- RETURNS TABLE(ord, item, item_jsonb, destination, event_id, attempt_id, lease_token, shape_problem)
-- (private, SPEC R-AK-9)
-- Purpose: the one parser of outcome batches (ack_deliveries, retry_deliveries,
--   quarantine_deliveries). p_items must be a JSON array of at most 1000 items (else 22023 for
--   the whole call: nothing to answer item by item), and a document holding \u0000 anywhere is
--   OB201 for the whole call (PostgreSQL's json operators cannot read it). Each item comes back in input order with
--   its fence fields; shape_problem is the 22023 DETAIL when the item is not an object, has a
--   member outside p_keys or lacks one of p_required, or a fence field present is not a string
--   or not a UUID. A missing or null fence field is left NULL: the fencing rule answers it
--   (OB001 incomplete fence), exactly as for the one-row functions. Members are read with the json (not jsonb) operators so documents inside an item
--   keep their text (duplicate keys stay detectable): item is the json text, item_jsonb the
--   same item parsed once (for cheap member access; the json operators re-parse on every use).
-- Caller: the batch outcome functions; granted to nobody.
CREATE FUNCTION outbox._batch_items(p_items json, p_call text, p_keys text[], p_required text[])
RETURNS TABLE (ord integer, item json, item_jsonb jsonb, destination text, event_id uuid, attempt_id uuid,
               lease_token uuid, shape_problem text)
LANGUAGE plpgsql
STABLE
-- search_path: not SET here on purpose - a SET clause costs a GUC save/restore on every call;
-- this private helper runs only inside the pinned search_path of its SECURITY DEFINER callers and
-- schema-qualifies everything.
AS $fn$
#variable_conflict use_column
BEGIN
    IF p_items IS NULL OR pg_catalog.json_typeof(p_items) <> 'array' THEN
        RAISE EXCEPTION '%: items must be a JSON array', p_call
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('got %s', coalesce(pg_catalog.json_typeof(p_items), 'NULL'));
    END IF;
    IF pg_catalog.json_array_length(p_items) > 1000 THEN
        RAISE EXCEPTION '%: too many items', p_call
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('%s items; at most 1000 per call', pg_catalog.json_array_length(p_items));
    END IF;
    RETURN QUERY
    SELECT x.ord::integer, x.item, x.jb, x.jb->>'destination',
           CASE WHEN x.jb->>'eventId' ~* c.uuid_re THEN (x.jb->>'eventId')::uuid END,
           CASE WHEN x.jb->>'attemptId' ~* c.uuid_re THEN (x.jb->>'attemptId')::uuid END,
           CASE WHEN x.jb->>'leaseToken' ~* c.uuid_re THEN (x.jb->>'leaseToken')::uuid END,
           CASE
               WHEN x.jb IS NULL THEN pg_catalog.format('item %s is not a JSON object', x.ord)
               -- the common case, decided cheaply: known members, fence fields absent/null/UUID strings
               WHEN (SELECT pg_catalog.bool_and(k.k = ANY (p_keys) AND
                                                 (k.k NOT IN ('destination', 'eventId', 'attemptId', 'leaseToken')
                                                  OR pg_catalog.jsonb_typeof(x.jb->k.k) = 'null'
                                                  OR (pg_catalog.jsonb_typeof(x.jb->k.k) = 'string'
                                                      AND (k.k = 'destination' OR x.jb->>k.k ~* c.uuid_re))))
                       FROM pg_catalog.jsonb_object_keys(x.jb) AS k(k))
                    AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_required) AS r(r)
                                     WHERE coalesce(pg_catalog.jsonb_typeof(x.jb->r.r), 'null') = 'null')
                   THEN NULL
               ELSE (SELECT pg_catalog.format('item %s: %s', x.ord, p.msg)
                       FROM (SELECT pg_catalog.format('unknown member %s', k.k) AS msg, 1 AS o, k.k AS n
                               FROM pg_catalog.jsonb_object_keys(x.jb) AS k(k)
                              WHERE k.k <> ALL (p_keys)
                             UNION ALL
                             SELECT pg_catalog.format('missing member %s', r.r), 2, r.r
                               FROM pg_catalog.unnest(p_required) AS r(r)
                              WHERE coalesce(pg_catalog.jsonb_typeof(x.jb->r.r), 'null') = 'null'
                             UNION ALL
                             SELECT pg_catalog.format('%s must be a string', f.f), 3, f.f
                               FROM pg_catalog.unnest(ARRAY['destination', 'eventId', 'attemptId', 'leaseToken']) AS f(f)
                              WHERE pg_catalog.jsonb_typeof(x.jb->f.f) NOT IN ('string', 'null')
                             UNION ALL
                             SELECT pg_catalog.format('%s is not a UUID', f.f), 4, f.f
                               FROM pg_catalog.unnest(ARRAY['eventId', 'attemptId', 'leaseToken']) AS f(f)
                              WHERE pg_catalog.jsonb_typeof(x.jb->f.f) = 'string' AND x.jb->>f.f !~* c.uuid_re) AS p
                      ORDER BY p.o, p.n LIMIT 1)
           END
      FROM pg_catalog.json_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
     CROSS JOIN LATERAL (SELECT e.item, e.ord,
                                CASE WHEN pg_catalog.json_typeof(e.item) = 'object' THEN e.item::jsonb END AS jb
                         OFFSET 0) AS x
     CROSS JOIN (SELECT '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'::text AS uuid_re) AS c
     ORDER BY x.ord;
EXCEPTION WHEN untranslatable_character OR character_not_in_repertoire OR invalid_text_representation THEN
    -- PostgreSQL's json operators cannot read a document holding \u0000 anywhere: no item can
    -- be told apart, so the whole call is refused (a caller retries its items one by one).
    RAISE EXCEPTION '%: items are not canonicalizable', p_call
        USING ERRCODE = 'OB201', DETAIL = SQLERRM;
END
$fn$;

COMMENT ON FUNCTION outbox._batch_items(json, text, text[], text[]) IS
    'Private: parse an outcome batch (JSON array of at most 1000 items) into fence fields and a per-item 22023 shape problem (SPEC R-AK-9).';
REVOKE ALL ON FUNCTION outbox._batch_items(json, text, text[], text[]) FROM PUBLIC;

-- outbox._lock_deliveries(p_destinations text[], p_event_ids uuid[]) RETURNS void
-- (private, SPEC R-CL-3, R-AK-9)
-- Purpose: the one row-locking step of the batch outcome functions: lock the named deliveries
--   (parallel arrays; unknown ones are simply absent) FOR UPDATE in (destination, event_id)
--   order, so concurrent batches cannot deadlock on each other. The caller judges the items in a
--   later statement, which then sees the committed state of the locked rows.
-- Caller: ack_deliveries, retry_deliveries, quarantine_deliveries; granted to nobody.
CREATE FUNCTION outbox._lock_deliveries(p_destinations text[], p_event_ids uuid[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
-- search_path: not SET on purpose (see outbox._ack_problem); everything is schema-qualified.
AS $fn$
BEGIN
    PERFORM 1
       FROM outbox.outbox_deliveries AS d
      WHERE (d.destination, d.event_id) IN (SELECT u.dest, u.ev FROM unnest(p_destinations, p_event_ids) AS u(dest, ev))
      ORDER BY d.destination, d.event_id
        FOR UPDATE OF d;
END
$fn$;

COMMENT ON FUNCTION outbox._lock_deliveries(text[], uuid[]) IS
    'Private: lock the named deliveries FOR UPDATE in key order (SPEC R-AK-9).';
REVOKE ALL ON FUNCTION outbox._lock_deliveries(text[], uuid[]) FROM PUBLIC;

-- outbox._raise_item(p_call text, p_sqlstate text, p_detail text) RETURNS void  (private, SPEC R-AK-9)
-- Purpose: the one-row outcome functions (ack_delivery, retry_delivery, quarantine_delivery) are
--   batches of one; this turns the item's rejection into the exception those functions have
--   always raised: OB001 'fencing rejected', OB002 'ack rejected: <detail>', 22023 '<call>: ...',
--   each with the rule's DETAIL. Nothing happens when p_sqlstate is NULL.
-- Caller: the one-row outcome functions; granted to nobody.
CREATE FUNCTION outbox._raise_item(p_call text, p_sqlstate text, p_detail text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
-- search_path: not SET here on purpose - a SET clause costs a GUC save/restore on every call;
-- this private helper runs only inside the pinned search_path of its SECURITY DEFINER callers and
-- schema-qualifies everything.
AS $fn$
BEGIN
    IF p_sqlstate IS NULL THEN
        RETURN;
    ELSIF p_sqlstate = 'OB001' THEN
        RAISE EXCEPTION 'fencing rejected' USING ERRCODE = 'OB001', DETAIL = p_detail;
    ELSIF p_sqlstate = 'OB002' THEN
        RAISE EXCEPTION 'ack rejected: %', p_detail USING ERRCODE = 'OB002', DETAIL = p_detail;
    ELSE
        RAISE EXCEPTION '%: invalid argument', p_call USING ERRCODE = p_sqlstate, DETAIL = p_detail;
    END IF;
END
$fn$;

COMMENT ON FUNCTION outbox._raise_item(text, text, text) IS
    'Private: raise a batch item''s rejection as the one-row function''s exception (SPEC R-AK-9).';
REVOKE ALL ON FUNCTION outbox._raise_item(text, text, text) FROM PUBLIC;

-- outbox._ack_problem(p_delivery outbox.outbox_deliveries, p_event outbox.outbox_events,
--                     p_kind outbox.receipt_kinds, p_ack json, p_receipt json, p_candidate text) RETURNS text
-- (private, SPEC R-AK-1, R-AK-1a, R-AK-2, R-AK-9, D-2)
-- THE ack rule: ack_deliveries applies it to every item of a batch (ack_delivery is a batch of
--   one), so the one-row and the batch path can never disagree. Returns NULL when the ack is
--   acceptable, else the OB002 DETAIL naming the field. Never raises, changes nothing.
-- Purpose: accept an ActiveConsumerAck@1 and the receipt body it summarizes only when both match
--   the FROZEN delivery (consumer, expected receipt type and schema version, projection target),
--   the destination's receipt kind (p_kind, joined by the caller) and the event (id, digest
--   algorithm, sha); returns the problem (or NULL). Cost: every check is a PL/pgSQL expression
--   on jsonb (no query) except one query for duplicate keys (json vs jsonb key counts of the
--   three documents) and one for the closed member set; the detailed queries that name a
--   failing key run only on failure. Checks, in this order:
--   ack: a JSON object without duplicate keys and with exactly the keys destination,
--     consumerName, eventId, eventEnvelopeDigestAlgorithmVersion, eventEnvelopeSha256,
--     appliedReceipt; each equal to the delivery/event.
--   appliedReceipt: an object whose kind is the destination's receipt kind, whose kind's receipt
--     type is the frozen expected type, with exactly {kind, <P>Ref, <P>SchemaVersion,
--     <P>DigestAlgorithmVersion, <P>Digest} (P = the kind's field prefix): Ref a non-empty string
--     of at most 500 characters, SchemaVersion = the frozen expected schema version,
--     DigestAlgorithmVersion = jcs-sha256-v1, Digest 64 lower-case hex.
--   receipt: an object without duplicate keys carrying the same quartet values, the same
--     destination/consumerName/eventId/eventEnvelope* as the ack, its kind's time field
--     (UTC RFC 3339 with 6 fractional digits and Z); operations_projection receipts carry
--     projectionName, projectionVersion, eventType, eventSchemaVersion; when the delivery has a
--     projection target the receipt's projectionName/projectionVersion must equal the FROZEN
--     target (the receipt's own claim is never trusted); eventType/eventSchemaVersion, when
--     present, equal the event's; broker_publication receipts carry stream (string), sequence
--     (integer) and duplicate (boolean). Receipts are CLOSED (R-AK-1a): any member that is not
--     common or registered for the kind in outbox.receipt_kind_members is refused, and each
--     registered member has its JSON type (integers |n| <= 2^53-1).
--   digest (D-2): with p_candidate (the canonical text of the receipt minus <P>Ref, <P>Digest
--     and the time field, computed by the caller's Go canonicalizer) the hot path checks that
--     the text is canonical (outbox._jcs_text_problem, cheap checks), parses to exactly that
--     part of the receipt (jsonb equality) and hashes to the quartet's digest. Without it, or
--     when the candidate is not exactly that, the database canonicalizes the candidate itself
--     (slow path), so the hot path accepts exactly what the slow path accepts.
-- Caller: outbox.ack_deliveries; granted to nobody.
CREATE FUNCTION outbox._ack_problem(p_delivery outbox.outbox_deliveries, p_event outbox.outbox_events,
                                    p_kind outbox.receipt_kinds, p_ack json, p_receipt json, p_candidate text)
RETURNS text
LANGUAGE plpgsql
STABLE
-- search_path: not SET here on purpose - a SET clause costs a GUC save/restore on every call;
-- this private helper runs only inside the pinned search_path of its SECURITY DEFINER callers and
-- schema-qualifies everything.
AS $fn$
DECLARE
    c_ack_keys constant text[] := ARRAY['destination', 'consumerName', 'eventId',
                                        'eventEnvelopeDigestAlgorithmVersion', 'eventEnvelopeSha256',
                                        'appliedReceipt'];
    c_body_keys constant text[] := ARRAY['destination', 'consumerName', 'eventId',
                                         'eventEnvelopeDigestAlgorithmVersion', 'eventEnvelopeSha256'];
    v_kind      outbox.receipt_kinds := p_kind;
    v_dup_ack   boolean;
    v_dup_ar    boolean;
    v_dup_rc    boolean;
    v_ack       jsonb;
    v_ar        jsonb;
    v_rc        jsonb;
    v_p         text;
    v_key       text;
    v_quartet   text[];
    v_expected  jsonb;
    v_candidate json;
    v_digest    text;
BEGIN
  BEGIN
    -- ack document --------------------------------------------------------------------------
    IF p_ack IS NULL OR pg_catalog.json_typeof(p_ack) <> 'object' THEN
        RETURN ('ack must be a JSON object (ActiveConsumerAck@1)');
    END IF;
    v_ack := p_ack::jsonb;
    v_rc := CASE WHEN pg_catalog.json_typeof(p_receipt) = 'object' THEN p_receipt::jsonb END;
    -- duplicate keys (json keeps them, jsonb does not): one query for the three documents
    SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_ack))
               <> (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v_ack)),
           CASE WHEN pg_catalog.jsonb_typeof(v_ack->'appliedReceipt') = 'object'
                THEN (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_ack->'appliedReceipt'))
                         <> (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v_ack->'appliedReceipt'))
                ELSE false END,
           CASE WHEN v_rc IS NOT NULL
                THEN (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_receipt))
                         <> (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v_rc))
                ELSE false END
      INTO v_dup_ack, v_dup_ar, v_dup_rc;
    IF v_dup_ack THEN
        SELECT e.key INTO v_key FROM pg_catalog.json_each(p_ack) AS e
         GROUP BY e.key HAVING pg_catalog.count(*) > 1 ORDER BY e.key LIMIT 1;
        RETURN (pg_catalog.format('ack: duplicate key %s', v_key));
    END IF;
    IF v_ack - c_ack_keys <> '{}'::jsonb THEN
        SELECT k INTO v_key FROM pg_catalog.jsonb_object_keys(v_ack) AS k WHERE k <> ALL (c_ack_keys) ORDER BY k LIMIT 1;
        RETURN (pg_catalog.format('ack: unknown key %s', v_key));
    END IF;
    IF NOT v_ack ?& c_ack_keys THEN
        SELECT k INTO v_key FROM pg_catalog.unnest(c_ack_keys) AS k WHERE NOT v_ack ? k LIMIT 1;
        RETURN (pg_catalog.format('ack: missing key %s', v_key));
    END IF;

    IF v_ack->'destination' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.destination) THEN
        RETURN (pg_catalog.format('ack.destination %s is not the delivery''s destination %s',
                                                     v_ack->'destination', p_delivery.destination));
    END IF;
    IF v_ack->'consumerName' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.consumer_name) THEN
        RETURN (pg_catalog.format('ack.consumerName %s is not the frozen consumer %s',
                                                     v_ack->'consumerName', p_delivery.consumer_name));
    END IF;
    IF v_ack->'eventId' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.event_id::text) THEN
        RETURN (pg_catalog.format('ack.eventId %s is not the delivery''s event %s',
                                                     v_ack->'eventId', p_delivery.event_id));
    END IF;
    IF v_ack->'eventEnvelopeDigestAlgorithmVersion' IS DISTINCT FROM pg_catalog.to_jsonb(p_event.event_envelope_digest_algorithm_version) THEN
        RETURN (pg_catalog.format('ack.eventEnvelopeDigestAlgorithmVersion %s is not the event''s %s',
                                                     v_ack->'eventEnvelopeDigestAlgorithmVersion', p_event.event_envelope_digest_algorithm_version));
    END IF;
    IF v_ack->'eventEnvelopeSha256' IS DISTINCT FROM pg_catalog.to_jsonb(p_event.event_envelope_sha256) THEN
        RETURN (pg_catalog.format('ack.eventEnvelopeSha256 %s is not the event''s %s',
                                                     v_ack->'eventEnvelopeSha256', p_event.event_envelope_sha256));
    END IF;

    -- appliedReceipt (the receipt quartet) ---------------------------------------------------
    IF pg_catalog.json_typeof(p_ack->'appliedReceipt') IS DISTINCT FROM 'object' THEN
        RETURN ('ack.appliedReceipt must be a JSON object');
    END IF;
    IF v_dup_ar THEN
        SELECT e.key INTO v_key FROM pg_catalog.json_each(p_ack->'appliedReceipt') AS e
         GROUP BY e.key HAVING pg_catalog.count(*) > 1 ORDER BY e.key LIMIT 1;
        RETURN (pg_catalog.format('ack.appliedReceipt: duplicate key %s', v_key));
    END IF;
    v_ar := v_ack->'appliedReceipt';

    IF v_ar->'kind' IS DISTINCT FROM pg_catalog.to_jsonb(v_kind.receipt_kind) THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.kind %s is not the receipt kind %s of destination %s',
                                                     coalesce(v_ar->'kind', 'null'::jsonb), v_kind.receipt_kind, p_delivery.destination));
    END IF;
    IF v_kind.receipt_type IS DISTINCT FROM p_delivery.expected_receipt_type THEN
        RETURN (pg_catalog.format('receipt type %s of kind %s is not the frozen expected receipt type %s',
                                                     v_kind.receipt_type, v_kind.receipt_kind, p_delivery.expected_receipt_type));
    END IF;
    v_p := v_kind.field_prefix;
    v_quartet := ARRAY[v_p || 'Ref', v_p || 'SchemaVersion', v_p || 'DigestAlgorithmVersion', v_p || 'Digest'];

    IF v_ar - 'kind' - v_quartet <> '{}'::jsonb THEN
        SELECT k INTO v_key FROM pg_catalog.jsonb_object_keys(v_ar) AS k
         WHERE k <> 'kind' AND k <> ALL (v_quartet) ORDER BY k LIMIT 1;
        RETURN (pg_catalog.format('ack.appliedReceipt: unknown key %s', v_key));
    END IF;
    IF NOT v_ar ?& v_quartet THEN
        SELECT k INTO v_key FROM pg_catalog.unnest(v_quartet) AS k WHERE NOT v_ar ? k LIMIT 1;
        RETURN (pg_catalog.format('ack.appliedReceipt: missing receipt quartet field %s', v_key));
    END IF;
    IF pg_catalog.jsonb_typeof(v_ar->v_quartet[1]) IS DISTINCT FROM 'string' OR v_ar->>v_quartet[1] = ''
       OR pg_catalog.length(v_ar->>v_quartet[1]) > 500 THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.%s must be a non-empty string of at most 500 characters', v_quartet[1]));
    END IF;
    IF v_ar->v_quartet[2] IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.expected_receipt_schema_version)
       OR v_ar->>v_quartet[2] !~ '^[0-9]+$' THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.%s %s is not the frozen expected receipt schema version %s',
                                                     v_quartet[2], v_ar->v_quartet[2], p_delivery.expected_receipt_schema_version));
    END IF;
    IF v_ar->v_quartet[3] IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.%s %s is not jcs-sha256-v1', v_quartet[3], v_ar->v_quartet[3]));
    END IF;
    IF pg_catalog.jsonb_typeof(v_ar->v_quartet[4]) IS DISTINCT FROM 'string' OR v_ar->>v_quartet[4] !~ '^[0-9a-f]{64}$' THEN
        RETURN (pg_catalog.format('ack.appliedReceipt.%s must be 64 lower-case hex digits', v_quartet[4]));
    END IF;

    -- receipt body (R-AK-1a) ------------------------------------------------------------------
    IF p_receipt IS NULL OR pg_catalog.json_typeof(p_receipt) <> 'object' THEN
        RETURN ('receipt must be a JSON object (the receipt body is always passed)');
    END IF;
    IF v_dup_rc THEN
        SELECT e.key INTO v_key FROM pg_catalog.json_each(p_receipt) AS e
         GROUP BY e.key HAVING pg_catalog.count(*) > 1 ORDER BY e.key LIMIT 1;
        RETURN (pg_catalog.format('receipt: duplicate key %s', v_key));
    END IF;

    FOREACH v_key IN ARRAY v_quartet LOOP
        IF NOT v_rc ? v_key THEN
            RETURN (pg_catalog.format('receipt: missing field %s', v_key));
        END IF;
        IF v_rc->v_key IS DISTINCT FROM v_ar->v_key THEN
            RETURN (pg_catalog.format('receipt.%s %s differs from ack.appliedReceipt.%s %s',
                                                         v_key, v_rc->v_key, v_key, v_ar->v_key));
        END IF;
    END LOOP;
    FOREACH v_key IN ARRAY c_body_keys LOOP
        IF NOT v_rc ? v_key THEN
            RETURN (pg_catalog.format('receipt: missing field %s', v_key));
        END IF;
        IF v_rc->v_key IS DISTINCT FROM v_ack->v_key THEN
            RETURN (pg_catalog.format('receipt.%s %s differs from ack.%s %s',
                                                         v_key, v_rc->v_key, v_key, v_ack->v_key));
        END IF;
    END LOOP;
    IF NOT v_rc ? v_kind.time_field THEN
        RETURN (pg_catalog.format('receipt: missing field %s', v_kind.time_field));
    END IF;
    IF pg_catalog.jsonb_typeof(v_rc->v_kind.time_field) IS DISTINCT FROM 'string'
       OR v_rc->>v_kind.time_field !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN
        RETURN (pg_catalog.format('receipt.%s must be UTC RFC 3339 with 6 fractional digits and Z', v_kind.time_field));
    END IF;
    PERFORM (v_rc->>v_kind.time_field)::timestamptz; -- an invalid time is answered by the handler below

    -- The projection target comes from the frozen delivery, never from the receipt (R-AK-2).
    IF p_delivery.required_projection_name IS NOT NULL THEN
        IF v_rc->'projectionName' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.required_projection_name) THEN
            RETURN (pg_catalog.format('receipt.projectionName %s is not the frozen projection target %s',
                                                         coalesce(v_rc->'projectionName', 'null'::jsonb), p_delivery.required_projection_name));
        END IF;
        IF v_rc->'projectionVersion' IS DISTINCT FROM pg_catalog.to_jsonb(p_delivery.required_projection_version) THEN
            RETURN (pg_catalog.format('receipt.projectionVersion %s is not the frozen projection target version %s',
                                                         coalesce(v_rc->'projectionVersion', 'null'::jsonb), p_delivery.required_projection_version));
        END IF;
    END IF;
    IF v_rc ? 'eventType' AND v_rc->'eventType' IS DISTINCT FROM pg_catalog.to_jsonb(p_event.event_type) THEN
        RETURN (pg_catalog.format('receipt.eventType %s is not the event''s type %s', v_rc->'eventType', p_event.event_type));
    END IF;
    IF v_rc ? 'eventSchemaVersion' AND v_rc->'eventSchemaVersion' IS DISTINCT FROM pg_catalog.to_jsonb(p_event.schema_version) THEN
        RETURN (pg_catalog.format('receipt.eventSchemaVersion %s is not the event''s schema version %s',
                                                     v_rc->'eventSchemaVersion', p_event.schema_version));
    END IF;
    IF v_kind.receipt_kind = 'broker_publication' THEN
        IF pg_catalog.jsonb_typeof(v_rc->'stream') IS DISTINCT FROM 'string' THEN
            RETURN ('receipt.stream must be a string (broker_publication)');
        END IF;
        IF pg_catalog.jsonb_typeof(v_rc->'sequence') IS DISTINCT FROM 'number' OR v_rc->>'sequence' !~ '^[0-9]+$' THEN
            RETURN ('receipt.sequence must be a non-negative integer (broker_publication)');
        END IF;
        IF pg_catalog.jsonb_typeof(v_rc->'duplicate') IS DISTINCT FROM 'boolean' THEN
            RETURN ('receipt.duplicate must be a boolean (broker_publication)');
        END IF;
    END IF;

    -- closed receipt (R-AK-1a): every member is common or registered for the kind, with its
    -- type (integers |n| <= 2^53-1) - one query
    SELECT p.msg INTO v_key
      FROM (SELECT 1 AS o, k AS n,
                   pg_catalog.format('receipt: unknown member %s (receipts are closed: %s allows only its registered members)',
                                     k, v_kind.receipt_kind) AS msg
              FROM pg_catalog.jsonb_object_keys(v_rc - v_quartet - c_body_keys - v_kind.time_field) AS k
             WHERE NOT EXISTS (SELECT 1 FROM outbox.receipt_kind_members AS m
                                WHERE m.receipt_kind = v_kind.receipt_kind AND m.member = k)
            UNION ALL
            SELECT 2, m.member,
                   pg_catalog.format('receipt: %s', CASE
                       WHEN NOT v_rc ? m.member THEN pg_catalog.format('missing field %s (required for %s)', m.member, m.receipt_kind)
                       ELSE pg_catalog.format('%s must be a JSON %s', m.member, m.json_type) END)
              FROM outbox.receipt_kind_members AS m
             WHERE m.receipt_kind = v_kind.receipt_kind
               AND CASE WHEN NOT v_rc ? m.member THEN m.required
                        WHEN m.json_type = 'integer' THEN pg_catalog.jsonb_typeof(v_rc->m.member) IS DISTINCT FROM 'number'
                                                          OR v_rc->>m.member !~ '^-?(0|[1-9][0-9]{0,15})$'
                                                          OR pg_catalog.abs((v_rc->>m.member)::numeric) > 9007199254740991
                        ELSE pg_catalog.jsonb_typeof(v_rc->m.member) IS DISTINCT FROM m.json_type END) AS p
     ORDER BY p.o, p.n LIMIT 1;
    IF FOUND THEN
        RETURN v_key;
    END IF;

    -- receipt digest (D-2): jcs-sha256-v1 of the body minus <P>Ref, <P>Digest and the time field.
    -- Hot path: the caller's canonical candidate, proven canonical and equal to that part of the
    -- receipt; otherwise (no candidate, or one that is not exactly that) the slow path.
    IF p_candidate IS NOT NULL AND outbox._jcs_text_problem(p_candidate) IS NULL THEN
        IF p_candidate::jsonb = v_rc - v_quartet[1] - v_quartet[4] - v_kind.time_field THEN
            v_digest := outbox._sha256_hex(p_candidate);
        END IF;
    END IF;
    IF v_digest IS NULL THEN
        SELECT pg_catalog.json_object_agg(e.key, e.value) INTO v_candidate
          FROM pg_catalog.json_each(p_receipt) AS e
         WHERE e.key <> ALL (ARRAY[v_quartet[1], v_quartet[4], v_kind.time_field]);
        BEGIN
            v_digest := outbox.jcs_sha256(v_candidate);
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            RETURN (pg_catalog.format('receipt is not canonicalizable under jcs-sha256-v1: %s', SQLERRM));
        END;
    END IF;
    IF v_digest IS DISTINCT FROM v_ar->>v_quartet[4] THEN
        RETURN (pg_catalog.format('receipt digest %s (recomputed, jcs-sha256-v1) differs from %s %s',
                                                     v_digest, v_quartet[4], v_ar->>v_quartet[4]));
    END IF;

    RETURN NULL;
  EXCEPTION
    WHEN invalid_datetime_format OR datetime_field_overflow THEN
        RETURN pg_catalog.format('receipt.%s is not a valid time', v_kind.time_field);
    WHEN untranslatable_character OR character_not_in_repertoire OR invalid_text_representation THEN
        RETURN pg_catalog.format('ack or receipt is not canonicalizable under jcs-sha256-v1: %s', SQLERRM);
  END;
END
$fn$;

COMMENT ON FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text) IS
    'Private: the ack rule - NULL when an ActiveConsumerAck@1 and its receipt body match the frozen delivery, destination receipt kind and event, else the OB002 detail (SPEC R-AK-1, R-AK-1a, R-AK-2, D-2).';
REVOKE ALL ON FUNCTION outbox._ack_problem(outbox.outbox_deliveries, outbox.outbox_events, outbox.receipt_kinds, json, json, text) FROM PUBLIC;

-- outbox._publish_events(p_event_ids uuid[], p_now timestamptz) RETURNS uuid[]
-- (private, SPEC R-AK-3, R-AK-4, R-AK-9, T-5, §2 publication table)
-- Purpose: the publication function, set-based, called by ack_deliveries in the ack's transaction
--   with the events whose deliveries it just acknowledged. Returns the events of p_event_ids that
--   are published (now or before): every mandatory delivery acknowledged -> one row in
--   outbox.outbox_publications (CAS by primary key: inserted once, never changed). Events with
--   an open mandatory delivery stay unpublished ('not_complete' for the caller).
--   'invalid': raises OB002 when an acknowledged delivery of one of these events has ack fields
--   inconsistent with the event or its frozen member (only possible by tampering).
-- Locking: an event that, in this transaction's view, still has another mandatory delivery open
--   is locked (FOR NO KEY UPDATE, in event_id order) BEFORE the deliveries are counted in a new
--   statement: two transactions acknowledging the last two deliveries of one event serialize and
--   the second sees the first's ack (READ COMMITTED), so an event can never stay unpublished
--   once all its mandatory deliveries are acknowledged. An event whose other deliveries are all
--   acknowledged already (or that has one delivery) needs no lock. Lock order everywhere:
--   deliveries, then events.
-- Immutability: the publications trigger accepts an INSERT only while the transaction-local
--   setting pgoutbox.publishing is 'on' (set here around the INSERT) and only for events whose
--   mandatory deliveries are all acknowledged; UPDATE/DELETE/TRUNCATE are OB202 for everyone.
-- Caller: outbox.ack_deliveries (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._publish_events(p_event_ids uuid[], p_now timestamptz)
RETURNS uuid[]
LANGUAGE plpgsql
VOLATILE
-- search_path: not SET here on purpose - a SET clause costs a GUC save/restore on every call;
-- this private helper runs only inside the pinned search_path of its SECURITY DEFINER callers and
-- schema-qualifies everything.
AS $fn$
DECLARE
    v_bad      record;
    v_complete uuid[];
BEGIN
    IF p_event_ids IS NULL OR pg_catalog.cardinality(p_event_ids) = 0 THEN
        RETURN '{}'::uuid[];
    END IF;

    PERFORM 1
       FROM outbox.outbox_events AS e
      WHERE e.event_id = ANY (p_event_ids)
        AND NOT EXISTS (SELECT 1 FROM outbox.outbox_publications AS p WHERE p.event_id = e.event_id)
        AND EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                     WHERE d.event_id = e.event_id AND d.mandatory AND d.status <> 'acknowledged')
      ORDER BY e.event_id
        FOR NO KEY UPDATE OF e;

    SELECT d.destination, d.event_id INTO v_bad
      FROM outbox.outbox_deliveries AS d
      JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
     WHERE d.event_id = ANY (p_event_ids)
       AND d.status = 'acknowledged'
       AND (d.ack_event_envelope_sha256 IS DISTINCT FROM e.event_envelope_sha256
            OR d.ack_event_envelope_digest_algorithm_version IS DISTINCT FROM e.event_envelope_digest_algorithm_version
            OR d.ack_consumer_name IS DISTINCT FROM d.consumer_name
            OR d.ack_receipt_type IS DISTINCT FROM d.expected_receipt_type
            OR d.ack_receipt_schema_version IS DISTINCT FROM d.expected_receipt_schema_version
            OR d.ack_receipt_digest IS NULL)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ack rejected: publication invalid'
            USING ERRCODE = 'OB002',
                  DETAIL = pg_catalog.format('publication invalid: acknowledged delivery %s/%s does not match its event or frozen member',
                                             v_bad.destination, v_bad.event_id);
    END IF;

    SELECT pg_catalog.array_agg(u.event_id) INTO v_complete
      FROM (SELECT DISTINCT x.event_id FROM pg_catalog.unnest(p_event_ids) AS x(event_id)) AS u
     WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                        WHERE d.event_id = u.event_id AND d.mandatory AND d.status <> 'acknowledged');
    IF v_complete IS NULL THEN
        RETURN '{}'::uuid[];
    END IF;

    PERFORM pg_catalog.set_config('pgoutbox.publishing', 'on', true);
    INSERT INTO outbox.outbox_publications (event_id, published_at)
    SELECT u.event_id, p_now FROM pg_catalog.unnest(v_complete) AS u(event_id)
    ON CONFLICT (event_id) DO NOTHING;
    PERFORM pg_catalog.set_config('pgoutbox.publishing', '', true);
    RETURN v_complete;
END
$fn$;

COMMENT ON FUNCTION outbox._publish_events(uuid[], timestamptz) IS
    'Private: publication CAS for a set of events - a publication row once every mandatory delivery is acknowledged; OB002 when an ack is inconsistent (SPEC R-AK-4, R-AK-9).';
REVOKE ALL ON FUNCTION outbox._publish_events(uuid[], timestamptz) FROM PUBLIC;

-- outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval)
-- RETURNS TABLE(destination, consumer_name, event_id, attempt_id, lease_token, lease_expires_at,
--   attempt_number, expected_receipt_type, expected_receipt_schema_version,
--   required_projection_name, required_projection_version, event_envelope jsonb,
--   event_envelope_digest_algorithm_version, event_envelope_sha256, event_type,
--   event_schema_version, event_envelope_canonical)  (public, SPEC R-CL-1, R-CL-2, R-CL-5, R-CL-6, R-CL-7, §13)
-- Purpose: lease up to p_batch_size claimable deliveries of the given destinations to p_worker.
--   1. A bounded recovery step (outbox._dispatch_recover, at most p_batch_size rows of these
--      destinations) closes expired leases as lease_expired_unknown and makes them pending, so a
--      lone dispatcher recovers by itself (R-CL-2).
--   2. ONE statement: per destination, an index-ordered scan of the partial index
--      outbox_deliveries_claimable (destination, available_at, created_at, event_id)
--      WHERE status = 'pending' with FOR UPDATE SKIP LOCKED and LIMIT p_batch_size (a LATERAL
--      per destination keeps the plan index-driven with several destinations: cost is
--      O(batch x destinations), never O(backlog)); the candidates are merged in the order
--      available_at, created_at, event_id and cut to p_batch_size; an UPDATE ... RETURNING (by
--      ctid of the locked rows: a TID scan) sets status leased, a new lease token and attempt
--      id, owner, expiry = now + p_lease, attempt_count + 1, last_attempt_at; an INSERT appends
--      the immutable attempt start; each row's event is read by primary key. With several
--      destinations, rows locked by a destination's scan but cut by the merge stay locked (not
--      changed) until this short transaction ends; concurrent claimers skip them meanwhile.
--      The statement runs through EXECUTE ... USING so it is planned for the actual arguments
--      on every call: a cached generic plan (LIMIT estimated at 10 % of the table) would
--      hash-join the whole backlog and trigger JIT.
--   Eligible: status pending and available_at <= now. Terminal rows (acknowledged, quarantined)
--   are never in the index. No cursor or high-water mark is read or written.
--   Per-aggregate ordering (R-CL-7): for a destination with ordering = 'per_aggregate' a
--   delivery is skipped while a delivery of the same destination and aggregate_id with a smaller
--   aggregate_revision is pending or leased (index outbox_deliveries_open). For
--   ordering = 'none' (default) that check is not evaluated.
--   event_envelope_canonical is the canonical envelope text append_event verified or computed
--   (D-2): a caller checks sha256(text) = event_envelope_sha256 and sends those bytes, without
--   canonicalizing again (P-5). event_envelope is the same document as jsonb (rebuilt from the
--   stored columns, outbox._event_envelope, for a row without stored text). p_envelope
--   'canonical' (what the Go dispatcher passes) leaves event_envelope NULL whenever the canonical
--   text is there: turning 100 envelopes into jsonb costs more than the rest of the claim (P-4).
-- Time: now = clock_timestamp() captured once at the start of the call and used for the
--   eligibility test, the lease expiry, last_attempt_at and started_at. The claim is meant to run
--   in its own short transaction (R-CL-5: commit before calling the consumer); taking the wall
--   clock rather than the transaction start keeps the lease length exact even if the caller
--   opened the transaction earlier.
-- SQLSTATEs: 22023 invalid_parameter_value for a worker that is not a literal
--   (^[a-z0-9][a-z0-9._@-]*$, at most 200 characters), an empty/NULL destination list, a
--   destination that is not a literal or not registered, a batch size outside 1..1000, a lease
--   outside 1 second..1 hour.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval,
                                        p_envelope text DEFAULT 'jsonb')
RETURNS TABLE (
    destination                             text,
    consumer_name                           text,
    event_id                                uuid,
    attempt_id                              uuid,
    lease_token                             uuid,
    lease_expires_at                        timestamptz,
    attempt_number                          integer,
    expected_receipt_type                   text,
    expected_receipt_schema_version         integer,
    required_projection_name                text,
    required_projection_version             integer,
    event_envelope                          jsonb,
    event_envelope_digest_algorithm_version text,
    event_envelope_sha256                   text,
    event_type                              text,
    event_schema_version                    text,
    event_envelope_canonical                text
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now          timestamptz := pg_catalog.clock_timestamp();
    v_destinations text[];
    v_bad          text;
BEGIN
    IF p_worker IS NULL OR p_worker !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_worker) > 200 THEN
        RAISE EXCEPTION 'claim_deliveries: invalid worker'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('worker %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_worker);
    END IF;
    IF p_batch_size IS NULL OR p_batch_size < 1 OR p_batch_size > 1000 THEN
        RAISE EXCEPTION 'claim_deliveries: invalid batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('batch_size %s is outside 1..1000', p_batch_size);
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'claim_deliveries: invalid lease'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('lease %s is outside 1 second..1 hour', p_lease);
    END IF;
    IF p_envelope IS NULL OR p_envelope NOT IN ('jsonb', 'canonical') THEN
        RAISE EXCEPTION 'claim_deliveries: invalid envelope form'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('envelope %L must be jsonb or canonical', p_envelope);
    END IF;
    IF p_destinations IS NULL OR pg_catalog.cardinality(p_destinations) = 0 THEN
        RAISE EXCEPTION 'claim_deliveries: no destinations'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'destinations must be a non-empty array of registered destinations';
    END IF;
    SELECT coalesce(u.d, 'NULL') INTO v_bad
      FROM pg_catalog.unnest(p_destinations) AS u(d)
     WHERE u.d IS NULL
        OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = u.d)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'claim_deliveries: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %s is not registered in outbox.delivery_destinations', v_bad);
    END IF;
    SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) INTO v_destinations
      FROM pg_catalog.unnest(p_destinations) AS u(d);

    -- 1. bounded recovery of expired leases of these destinations (R-CL-2)
    PERFORM outbox._dispatch_recover(v_destinations, p_batch_size, v_now);

    -- 2. claim (R-CL-1). Dynamic SQL on purpose: EXECUTE ... USING plans the statement for the
    -- actual arguments on every call (a one-shot custom plan), so the LIMIT is known to the
    -- planner and a cached generic plan (which estimates LIMIT $n as 10 % of the table and then
    -- hash-joins the whole backlog) can never be used. The statement is also shaped to stay
    -- O(batch) whatever the statistics say: the UPDATE finds the locked rows by ctid (TID scan;
    -- the rows are locked by this transaction, so their ctid cannot change), and the event of
    -- each claimed row is fetched by primary key in a LATERAL ... LIMIT 1 (never a hash join over
    -- the events table).
    RETURN QUERY EXECUTE $claim$
    WITH dest AS (
        SELECT dd.destination AS dest_name, dd.ordering AS dest_ordering
          FROM outbox.delivery_destinations AS dd
         WHERE dd.destination = ANY ($1)
    ), picked AS (
        SELECT c.row_ctid
          FROM dest
         CROSS JOIN LATERAL (
                SELECT d.ctid AS row_ctid, d.available_at, d.created_at, d.event_id
                  FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = dest.dest_name
                   AND d.status = 'pending'
                   AND d.available_at <= $2
                   AND (dest.dest_ordering = 'none'
                        OR NOT EXISTS (
                               SELECT 1
                                 FROM outbox.outbox_deliveries AS prior
                                WHERE prior.destination = d.destination
                                  AND prior.aggregate_id = d.aggregate_id
                                  AND prior.aggregate_revision < d.aggregate_revision
                                  AND prior.status IN ('pending', 'leased')))
                 ORDER BY d.available_at, d.created_at, d.event_id
                 LIMIT $3
                   FOR UPDATE OF d SKIP LOCKED
              ) AS c
         ORDER BY c.available_at, c.created_at, c.event_id
         LIMIT $3
    ), claimed AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status             = 'leased',
               lease_owner        = $4,
               lease_token        = pg_catalog.gen_random_uuid(),
               lease_expires_at   = $2 + $5,
               current_attempt_id = pg_catalog.gen_random_uuid(),
               attempt_count      = d.attempt_count + 1,
               last_attempt_at    = $2
         WHERE d.ctid = ANY (ARRAY(SELECT picked.row_ctid FROM picked))
           AND d.status = 'pending'
        RETURNING d.destination, d.event_id, d.consumer_name, d.current_attempt_id, d.lease_token,
                  d.lease_expires_at, d.attempt_count, d.expected_receipt_type,
                  d.expected_receipt_schema_version, d.required_projection_name,
                  d.required_projection_version, d.available_at, d.created_at
    ), started AS (
        INSERT INTO outbox.outbox_delivery_attempt_starts
               (attempt_id, destination, event_id, attempt_number, lease_token, worker, started_at)
        SELECT c.current_attempt_id, c.destination, c.event_id, c.attempt_count, c.lease_token, $4, $2
          FROM claimed AS c
        RETURNING attempt_id
    )
    SELECT c.destination, c.consumer_name, c.event_id, c.current_attempt_id, c.lease_token,
           c.lease_expires_at, c.attempt_count, c.expected_receipt_type,
           c.expected_receipt_schema_version, c.required_projection_name,
           c.required_projection_version, ev.envelope,
           ev.event_envelope_digest_algorithm_version, ev.event_envelope_sha256,
           ev.event_type, ev.schema_version, ev.canonical
      FROM claimed AS c
     CROSS JOIN LATERAL (
            SELECT CASE WHEN e.event_envelope_canonical IS NULL THEN outbox._event_envelope(e)
                        WHEN $6 = 'canonical' THEN NULL
                        ELSE e.event_envelope_canonical::jsonb END AS envelope,
                   e.event_envelope_digest_algorithm_version,
                   e.event_envelope_sha256, e.event_type, e.schema_version,
                   e.event_envelope_canonical AS canonical
              FROM outbox.outbox_events AS e
             WHERE e.event_id = c.event_id
             LIMIT 1
          ) AS ev
     ORDER BY c.available_at, c.created_at, c.event_id
    $claim$
    USING v_destinations, v_now, p_batch_size, p_worker, p_lease, p_envelope;
END
$fn$;

COMMENT ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) IS
    'Lease up to batch_size claimable deliveries (pending, available) of the destinations to worker, ordered by available_at, created_at, event_id; FOR UPDATE SKIP LOCKED; appends one attempt start per row; recovers expired leases of those destinations first. 22023 on invalid arguments. SPEC R-CL-1, R-CL-2, R-CL-6, R-CL-7.';
REVOKE ALL ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) TO outbox_dispatcher;

-- outbox.ack_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-1..4, R-AK-9, D-2, §13)
-- Purpose: record many ActiveConsumerAck@1 outcomes in one call and one transaction. p_items is a
--   JSON array (at most 1000) of {destination, eventId, attemptId, leaseToken, ack, receipt,
--   receiptDigestCandidate?}; receiptDigestCandidate is the canonical text of the receipt minus
--   <prefix>Ref, <prefix>Digest and its time field (D-2 receipt hot path). One row comes back
--   per item, in input order: outcome 'complete' (the event is published, now or before),
--   'not_complete' (acknowledged; another mandatory delivery of the event is open) or
--   'rejected' with sqlstate and detail: 22023 (item shape), OB001 (fencing; also a delivery
--   named twice in one batch: the second is refused), OB002 (the ack rule, outbox._ack_problem).
--   A rejected item changes nothing and never stops the others.
-- Set-based: one statement locks the named deliveries (FOR UPDATE, in destination/event order),
--   one judges every item (fence rule outbox._fence_problem, then the ack rule), one appends the
--   success finishes and sets the deliveries acknowledged with the ack columns, then the
--   publication function runs once for the set of events (once per event even when several of
--   its deliveries are in the batch).
-- Time: now = clock_timestamp() captured once per call (live-lease test, finish time,
--   delivered_at, published_at).
-- SQLSTATEs (whole call): 22023 when p_items is not a JSON array or has more than 1000 items;
--   OB002 when publication finds an acknowledged delivery inconsistent with its event
--   (tampering). Item-level codes come back as rows.
-- Caller: outbox_dispatcher (also through outbox.ack_delivery, a batch of one).
CREATE FUNCTION outbox.ack_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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
    v_cand      text[];
    v_state     text[];
    v_detail    text[];
    v_events    uuid[];
    v_published uuid[];
BEGIN
    SELECT pg_catalog.array_agg(b.ord ORDER BY b.ord), pg_catalog.array_agg(b.destination ORDER BY b.ord),
           pg_catalog.array_agg(b.event_id ORDER BY b.ord), pg_catalog.array_agg(b.attempt_id ORDER BY b.ord),
           pg_catalog.array_agg(b.lease_token ORDER BY b.ord),
           pg_catalog.array_agg(b.item->'ack' ORDER BY b.ord), pg_catalog.array_agg(b.item->'receipt' ORDER BY b.ord),
           pg_catalog.array_agg(CASE WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'receiptDigestCandidate') = 'string'
                                     THEN b.item_jsonb->>'receiptDigestCandidate' END ORDER BY b.ord),
           pg_catalog.array_agg(CASE WHEN b.shape_problem IS NOT NULL THEN '22023'
                                     WHEN b.item_jsonb->'receiptDigestCandidate' IS NOT NULL
                                      AND pg_catalog.jsonb_typeof(b.item_jsonb->'receiptDigestCandidate') NOT IN ('string', 'null')
                                     THEN '22023' END ORDER BY b.ord),
           pg_catalog.array_agg(coalesce(b.shape_problem,
                                         CASE WHEN b.item_jsonb->'receiptDigestCandidate' IS NOT NULL
                                               AND pg_catalog.jsonb_typeof(b.item_jsonb->'receiptDigestCandidate') NOT IN ('string', 'null')
                                              THEN pg_catalog.format('item %s: receiptDigestCandidate must be a string', b.ord) END)
                                ORDER BY b.ord)
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_cand, v_state, v_detail
      FROM outbox._batch_items(p_items, 'ack_deliveries',
                               ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'ack', 'receipt', 'receiptDigestCandidate'],
                               ARRAY[]::text[]) AS b;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    -- 1. lock the named deliveries in a fixed order (concurrent batches cannot deadlock on them)
    PERFORM outbox._lock_deliveries(v_dest, v_event);

    -- 2. judge every item: shape, then fencing, then the ack rule (a fresh statement: it sees the
    --    committed state of the rows locked above)
    -- (a MATERIALIZED CTE: each rule runs exactly once per item; a flattened subquery would let
    -- the planner copy the rule's call into every expression that reads its result)
    WITH judged AS MATERIALIZED (
        SELECT u.ord, u.state, u.detail, f.problem AS fence_problem, a.problem AS ack_problem
          FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                  FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_cand, v_state, v_detail)
                       AS x(ord, dest, ev, att, tok, ack, rc, cand, state, detail)) AS u
          LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
          LEFT JOIN outbox.outbox_events AS e ON e.event_id = u.ev
          LEFT JOIN outbox.delivery_destinations AS dd ON dd.destination = u.dest
          LEFT JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         CROSS JOIN LATERAL (
                SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                            WHEN u.rn > 1
                            THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                            ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
              ) AS f
         CROSS JOIN LATERAL (
                SELECT CASE WHEN u.state IS NULL AND f.problem IS NULL
                            THEN outbox._ack_problem(d, e, rk, u.ack, u.rc, u.cand) END AS problem
              ) AS a
    )
    SELECT pg_catalog.array_agg(CASE WHEN j.state IS NOT NULL THEN j.state
                                     WHEN j.fence_problem IS NOT NULL THEN 'OB001'
                                     WHEN j.ack_problem IS NOT NULL THEN 'OB002' END ORDER BY j.ord),
           pg_catalog.array_agg(coalesce(j.detail, j.fence_problem, j.ack_problem) ORDER BY j.ord)
      INTO v_state, v_detail
      FROM judged AS j;

    -- 3. the accepted items: success finish (keeping the receipt body for the audit sweep
    --    outbox.verify_ack_digests), acknowledged with the ack columns (R-AK-3)
    WITH ok AS (
        SELECT u.dest, u.ev, u.att, u.tok, u.ack::jsonb AS ack, u.rc
          FROM unnest(v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_state) AS u(dest, ev, att, tok, ack, rc, state)
         WHERE u.state IS NULL
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref, receipt)
        SELECT ok.att, v_now, 'acknowledged', 'none', NULL, NULL, ok.rc FROM ok
        RETURNING attempt_id
    ), acked AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status                                      = 'acknowledged',
               delivered_at                                = v_now,
               lease_owner                                 = NULL,
               lease_token                                 = NULL,
               lease_expires_at                            = NULL,
               ack_consumer_name                           = ok.ack->>'consumerName',
               ack_receipt_kind                            = rk.receipt_kind,
               ack_receipt_type                            = rk.receipt_type,
               ack_receipt_ref                             = ok.ack->'appliedReceipt'->>(rk.field_prefix || 'Ref'),
               ack_receipt_schema_version                  = (ok.ack->'appliedReceipt'->>(rk.field_prefix || 'SchemaVersion'))::integer,
               ack_receipt_digest_algorithm_version        = ok.ack->'appliedReceipt'->>(rk.field_prefix || 'DigestAlgorithmVersion'),
               ack_receipt_digest                          = ok.ack->'appliedReceipt'->>(rk.field_prefix || 'Digest'),
               ack_event_envelope_digest_algorithm_version = ok.ack->>'eventEnvelopeDigestAlgorithmVersion',
               ack_event_envelope_sha256                   = ok.ack->>'eventEnvelopeSha256'
          FROM ok
          JOIN outbox.delivery_destinations AS dd ON dd.destination = ok.dest
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         WHERE d.destination = ok.dest AND d.event_id = ok.ev
           AND d.status = 'leased' AND d.current_attempt_id = ok.att AND d.lease_token = ok.tok
        RETURNING d.event_id
    )
    SELECT pg_catalog.array_agg(DISTINCT acked.event_id) INTO v_events FROM acked;

    -- 4. publication, once per event (R-AK-4)
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
    'Record many ActiveConsumerAck@1 outcomes in one transaction, each fenced and validated by the same rule as ack_delivery; one row per item in input order: complete | not_complete | rejected (sqlstate, detail). Publication once per completed event. SPEC R-AK-9, D-2.';
REVOKE ALL ON FUNCTION outbox.ack_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_deliveries(json) TO outbox_dispatcher;

-- outbox.retry_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-5, R-AK-7, R-AK-9, §13)
-- Purpose: record many retryable outcomes in one call and one transaction. p_items is a JSON
--   array (at most 1000) of {destination, eventId, attemptId, leaseToken, errorCode, errorRef?}.
--   One row per item in input order: outcome 'pending' (retryable finish appended, back to
--   pending at now + backoff(policy, attempt_count)), 'quarantined' (the policy's max attempts
--   reached: quarantined as retry_exhausted - never silent success) or 'rejected' with sqlstate
--   and detail: 22023 (item shape, unknown or non-retryable error code), OB001 (fencing, or the
--   delivery named twice in the batch). A rejected item changes nothing and never stops the others.
--   errorCode awaiting_revision never exhausts (R-AK-5, seed 000: a gap is quarantined only on
--   evidence, never by a count): it keeps backing off (the backoff saturates at the policy's cap).
--   errorRef is sanitized (control characters and runs of blanks collapsed, at most 200 characters).
-- Set-based: lock (FOR UPDATE, destination/event order), judge, then one statement for the
--   pending ones and one (outbox._quarantine_write) for the exhausted ones.
-- Time: now = clock_timestamp() captured once per call.
-- SQLSTATEs (whole call): 22023 when p_items is not a JSON array or has more than 1000 items.
-- Caller: outbox_dispatcher (also through outbox.retry_delivery, a batch of one).
CREATE FUNCTION outbox.retry_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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
    SELECT pg_catalog.array_agg(b.ord ORDER BY b.ord), pg_catalog.array_agg(b.destination ORDER BY b.ord),
           pg_catalog.array_agg(b.event_id ORDER BY b.ord), pg_catalog.array_agg(b.attempt_id ORDER BY b.ord),
           pg_catalog.array_agg(b.lease_token ORDER BY b.ord),
           pg_catalog.array_agg(b.item_jsonb->>'errorCode' ORDER BY b.ord),
           pg_catalog.array_agg(outbox._dispatch_sanitize_ref(b.item_jsonb->>'errorRef') ORDER BY b.ord),
           pg_catalog.array_agg(CASE WHEN b.shape_problem IS NOT NULL OR c.problem IS NOT NULL THEN '22023' END ORDER BY b.ord),
           pg_catalog.array_agg(coalesce(b.shape_problem, c.problem) ORDER BY b.ord)
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_ref, v_state, v_detail
      FROM outbox._batch_items(p_items, 'retry_deliveries',
                               ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'errorCode', 'errorRef'],
                               ARRAY[]::text[]) AS b
      LEFT JOIN outbox.error_codes AS ec ON ec.code = b.item_jsonb->>'errorCode'
     CROSS JOIN LATERAL (
            SELECT CASE
                WHEN b.shape_problem IS NOT NULL THEN NULL
                WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'errorCode') <> 'string' OR ec.code IS NULL
                    THEN pg_catalog.format('error_code %s is not in outbox.error_codes', b.item_jsonb->'errorCode')
                WHEN NOT ec.retryable
                    THEN pg_catalog.format('error_code %s is non-retryable: use quarantine_delivery', ec.code)
                WHEN b.item_jsonb->'errorRef' IS NOT NULL AND pg_catalog.jsonb_typeof(b.item_jsonb->'errorRef') NOT IN ('string', 'null')
                    THEN 'errorRef must be a string'
            END AS problem
          ) AS c;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);
    -- a destination without a policy row gets its default one (register_destination inserts it)
    PERFORM outbox._ensure_retry_policy(x.dest)
       FROM (SELECT DISTINCT d.destination AS dest
               FROM unnest(v_dest, v_event) AS u(dest, ev)
               JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev) AS x
      WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_retry_policies AS rp WHERE rp.destination = x.dest);

    -- judge: fencing, then exhaustion by the policy
    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord),
           pg_catalog.array_agg(j.outcome ORDER BY j.ord)
      INTO v_state, v_detail, v_outcome
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail,
                   CASE WHEN u.state IS NOT NULL OR f.problem IS NOT NULL THEN 'rejected'
                        WHEN d.attempt_count >= rp.max_attempts AND u.code <> 'awaiting_revision' THEN 'quarantined'
                        ELSE 'pending' END AS outcome
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, code, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
              LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = u.dest
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
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
           available_at     = v_now + outbox._backoff_delay(rp, d.attempt_count),
           lease_owner      = NULL,
           lease_token      = NULL,
           lease_expires_at = NULL,
           last_error_code  = ok.code,
           last_error_ref   = ok.ref
      FROM ok
      JOIN outbox.outbox_retry_policies AS rp ON rp.destination = ok.dest
     WHERE d.destination = ok.dest AND d.event_id = ok.ev
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

-- outbox.quarantine_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-6, R-AK-7, R-AK-9, §13)
-- Purpose: record many non-retryable outcomes in one call and one transaction. p_items is a JSON
--   array (at most 1000) of {destination, eventId, attemptId, leaseToken, reason, errorCode,
--   errorRef?}: reason a non-retryable code of outbox.error_codes, errorCode any code there,
--   errorRef (optional, sanitized) the consumer's reference kept on the finish. One row per item
--   in input order: outcome 'quarantined' (non_retryable finish, terminal state, quarantine row
--   with the event digest - a state, never a deletion) or 'rejected' with sqlstate and detail:
--   22023 (shape, reason, code), OB001 (fencing, or the delivery named twice in the batch).
-- Set-based: lock (FOR UPDATE, destination/event order), judge, outbox._quarantine_write.
-- Time: now = clock_timestamp() captured once per call.
-- SQLSTATEs (whole call): 22023 when p_items is not a JSON array or has more than 1000 items.
-- Caller: outbox_dispatcher (also through outbox.quarantine_delivery, a batch of one).
CREATE FUNCTION outbox.quarantine_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_ord     integer[];
    v_dest    text[];
    v_event   uuid[];
    v_attempt uuid[];
    v_token   uuid[];
    v_reason  text[];
    v_code    text[];
    v_ref     text[];
    v_state   text[];
    v_detail  text[];
BEGIN
    SELECT pg_catalog.array_agg(b.ord ORDER BY b.ord), pg_catalog.array_agg(b.destination ORDER BY b.ord),
           pg_catalog.array_agg(b.event_id ORDER BY b.ord), pg_catalog.array_agg(b.attempt_id ORDER BY b.ord),
           pg_catalog.array_agg(b.lease_token ORDER BY b.ord),
           pg_catalog.array_agg(b.item_jsonb->>'reason' ORDER BY b.ord),
           pg_catalog.array_agg(b.item_jsonb->>'errorCode' ORDER BY b.ord),
           pg_catalog.array_agg(outbox._dispatch_sanitize_ref(b.item_jsonb->>'errorRef') ORDER BY b.ord),
           pg_catalog.array_agg(CASE WHEN b.shape_problem IS NOT NULL OR c.problem IS NOT NULL THEN '22023' END ORDER BY b.ord),
           pg_catalog.array_agg(coalesce(b.shape_problem, c.problem) ORDER BY b.ord)
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_reason, v_code, v_ref, v_state, v_detail
      FROM outbox._batch_items(p_items, 'quarantine_deliveries',
                               ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'reason', 'errorCode', 'errorRef'],
                               ARRAY[]::text[]) AS b
      LEFT JOIN outbox.error_codes AS rc ON rc.code = b.item_jsonb->>'reason' AND NOT rc.retryable
      LEFT JOIN outbox.error_codes AS ec ON ec.code = b.item_jsonb->>'errorCode'
     CROSS JOIN LATERAL (
            SELECT CASE
                WHEN b.shape_problem IS NOT NULL THEN NULL
                WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'reason') <> 'string' OR rc.code IS NULL
                    THEN pg_catalog.format('reason %s is not a non-retryable code of outbox.error_codes', b.item_jsonb->'reason')
                WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'errorCode') <> 'string' OR ec.code IS NULL
                    THEN pg_catalog.format('error_code %s is not in outbox.error_codes', b.item_jsonb->'errorCode')
                WHEN b.item_jsonb->'errorRef' IS NOT NULL AND pg_catalog.jsonb_typeof(b.item_jsonb->'errorRef') NOT IN ('string', 'null')
                    THEN 'errorRef must be a string'
            END AS problem
          ) AS c;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);

    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord)
      INTO v_state, v_detail
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
           ) AS j;

    PERFORM outbox._quarantine_write(pg_catalog.array_agg(u.dest), pg_catalog.array_agg(u.ev), pg_catalog.array_agg(u.att),
                                     'non_retryable', pg_catalog.array_agg(u.reason),
                                     pg_catalog.array_agg(u.code), pg_catalog.array_agg(u.ref), v_now)
       FROM unnest(v_dest, v_event, v_attempt, v_reason, v_code, v_ref, v_state)
            AS u(dest, ev, att, reason, code, ref, state)
      WHERE u.state IS NULL
     HAVING pg_catalog.count(*) > 0;

    RETURN QUERY
    SELECT u.dest, u.ev, u.att, CASE WHEN u.state IS NULL THEN 'quarantined' ELSE 'rejected' END, u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_state, v_detail)
           AS u(ord, dest, ev, att, state, detail)
     ORDER BY u.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.quarantine_deliveries(json) IS
    'Record many non-retryable outcomes in one transaction, each fenced like quarantine_delivery; one row per item in input order: quarantined | rejected (sqlstate, detail). SPEC R-AK-6, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.quarantine_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_deliveries(json) TO outbox_dispatcher;

-- outbox.ack_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                     p_ack json, p_receipt json, p_receipt_digest_candidate text DEFAULT NULL)
--   RETURNS text  (public, SPEC R-AK-1..4, R-AK-9, D-2, §13)
-- Purpose: record one consumer's ActiveConsumerAck@1 (p_ack) and the receipt body it summarizes
--   (p_receipt, always passed: R-AK-1a); p_receipt_digest_candidate is the optional D-2 hot-path
--   argument (canonical text of the receipt minus <prefix>Ref, <prefix>Digest and its time).
--   A batch of one of outbox.ack_deliveries - the same fencing rule, ack rule, writes and
--   publication, in one transaction (R-AK-3) - returning 'complete' (the event is published, now
--   or before) or 'not_complete' (other mandatory deliveries of the event are still open).
-- Locking/fencing, time: see outbox.ack_deliveries.
-- SQLSTATEs: OB001 fencing rejected (DETAIL names the cause); OB002 ack rejected (DETAIL names
--   the field) or publication invalid. On any error nothing changes: the delivery stays leased
--   and will be retried or recovered.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.ack_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                    p_lease_token uuid, p_ack json, p_receipt json,
                                    p_receipt_digest_candidate text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_r record;
BEGIN
    SELECT r.outcome, r.sqlstate, r.detail INTO v_r
      FROM outbox.ack_deliveries(pg_catalog.json_build_array(pg_catalog.json_build_object(
               'destination', p_destination, 'eventId', p_event_id, 'attemptId', p_attempt_id,
               'leaseToken', p_lease_token, 'ack', p_ack, 'receipt', p_receipt,
               'receiptDigestCandidate', p_receipt_digest_candidate))) AS r;
    PERFORM outbox._raise_item('ack_delivery', v_r.sqlstate, v_r.detail);
    RETURN v_r.outcome;
END
$fn$;

COMMENT ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json, text) IS
    'Accept an ActiveConsumerAck@1 with its receipt body (and optionally its D-2 digest candidate) for a fenced live lease: a batch of one of ack_deliveries; returns complete | not_complete. OB001 fencing, OB002 ack mismatch. SPEC R-AK-1..4, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_delivery(text, uuid, uuid, uuid, json, json, text) TO outbox_dispatcher;

-- outbox.retry_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                       p_error_code text, p_error_ref text DEFAULT NULL) RETURNS text
-- (public, SPEC R-AK-5, R-AK-7, R-AK-9, §13)
-- Purpose: record one retryable outcome - a batch of one of outbox.retry_deliveries (same
--   fencing, same code rule, same backoff and exhaustion): 'pending' (back to pending after the
--   policy's backoff) or 'quarantined' (max attempts reached: retry_exhausted; never for
--   awaiting_revision, R-AK-5). p_error_ref is sanitized.
-- SQLSTATEs: 22023 unknown or non-retryable error code; OB001 fencing rejected. Nothing changes
--   on error.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.retry_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                      p_lease_token uuid, p_error_code text, p_error_ref text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_r record;
BEGIN
    SELECT r.outcome, r.sqlstate, r.detail INTO v_r
      FROM outbox.retry_deliveries(pg_catalog.json_build_array(pg_catalog.json_build_object(
               'destination', p_destination, 'eventId', p_event_id, 'attemptId', p_attempt_id,
               'leaseToken', p_lease_token, 'errorCode', p_error_code, 'errorRef', p_error_ref))) AS r;
    PERFORM outbox._raise_item('retry_delivery', v_r.sqlstate, v_r.detail);
    RETURN v_r.outcome;
END
$fn$;

COMMENT ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) IS
    'Record a retryable outcome for a fenced live lease (a batch of one of retry_deliveries): pending after backoff, or quarantined as retry_exhausted at max attempts. 22023 bad code, OB001 fencing. SPEC R-AK-5, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retry_delivery(text, uuid, uuid, uuid, text, text) TO outbox_dispatcher;

-- outbox.quarantine_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
--                            p_lease_token uuid, p_reason text, p_error_code text) RETURNS void
-- (public, SPEC R-AK-6, R-AK-7, R-AK-9, §13)
-- Purpose: record one non-retryable outcome - a batch of one of outbox.quarantine_deliveries
--   (same fencing, same reason/code rule, same quarantine write): non_retryable finish, terminal
--   quarantined, quarantine row with the event digest.
-- SQLSTATEs: 22023 reason not a non-retryable code / unknown error code; OB001 fencing rejected.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.quarantine_delivery(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                           p_lease_token uuid, p_reason text, p_error_code text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_r record;
BEGIN
    SELECT r.outcome, r.sqlstate, r.detail INTO v_r
      FROM outbox.quarantine_deliveries(pg_catalog.json_build_array(pg_catalog.json_build_object(
               'destination', p_destination, 'eventId', p_event_id, 'attemptId', p_attempt_id,
               'leaseToken', p_lease_token, 'reason', p_reason, 'errorCode', p_error_code))) AS r;
    PERFORM outbox._raise_item('quarantine_delivery', v_r.sqlstate, v_r.detail);
END
$fn$;

COMMENT ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text) IS
    'Quarantine a fenced live lease (a batch of one of quarantine_deliveries): non_retryable finish, terminal state, quarantine row with the event digest. 22023 bad reason/code, OB001 fencing. SPEC R-AK-6, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_delivery(text, uuid, uuid, uuid, text, text) TO outbox_dispatcher;

-- outbox.verify_ack_digests(p_max_rows integer DEFAULT 10000)
-- RETURNS TABLE(destination text, event_id uuid, problem text)  (public, SPEC D-2, §13)
-- Purpose: the audit sweep of the D-2 receipt hot path. For up to p_max_rows acknowledged
--   deliveries (oldest first) it re-canonicalizes the receipt body kept on the acknowledged
--   finish with the database's own canonicalizer (outbox.jcs_sha256 of the body minus
--   <prefix>Ref, <prefix>Digest and the kind's time field) and reports every delivery whose
--   stored ack_receipt_digest it does not reproduce, whose receipt is missing or not
--   canonicalizable, or whose receipt's ref/digest members differ from the ack columns.
-- Read-only. Cost: one PL/pgSQL canonicalization per row (an audit job, not the hot path).
-- Caller: outbox_auditor.
CREATE FUNCTION outbox.verify_ack_digests(p_max_rows integer DEFAULT 10000)
RETURNS TABLE (destination text, event_id uuid, problem text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_r      record;
    v_digest text;
BEGIN
    IF p_max_rows IS NULL OR p_max_rows < 1 OR p_max_rows > 1000000 THEN
        RAISE EXCEPTION 'verify_ack_digests: invalid max_rows'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('max_rows %s is outside 1..1000000', p_max_rows);
    END IF;
    FOR v_r IN
        SELECT d.destination, d.event_id, d.ack_receipt_digest, d.ack_receipt_ref, f.receipt, rk.field_prefix, rk.time_field
          FROM outbox.outbox_deliveries AS d
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = d.ack_receipt_kind
          LEFT JOIN outbox.outbox_delivery_attempt_finishes AS f
                 ON f.attempt_id = d.current_attempt_id AND f.outcome = 'acknowledged'
         WHERE d.status = 'acknowledged'
         ORDER BY d.delivered_at, d.destination, d.event_id
         LIMIT p_max_rows
    LOOP
        IF v_r.receipt IS NULL THEN
            destination := v_r.destination; event_id := v_r.event_id;
            problem := 'receipt body missing on the acknowledged finish';
            RETURN NEXT;
            CONTINUE;
        END IF;
        BEGIN
            SELECT outbox.jcs_sha256(pg_catalog.json_object_agg(e.key, e.value)) INTO v_digest
              FROM pg_catalog.json_each(v_r.receipt) AS e
             WHERE e.key <> ALL (ARRAY[v_r.field_prefix || 'Ref', v_r.field_prefix || 'Digest', v_r.time_field]);
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            destination := v_r.destination; event_id := v_r.event_id;
            problem := pg_catalog.format('receipt not canonicalizable: %s', SQLERRM);
            RETURN NEXT;
            CONTINUE;
        END;
        IF v_digest IS DISTINCT FROM v_r.ack_receipt_digest
           OR (v_r.receipt::jsonb)->>(v_r.field_prefix || 'Digest') IS DISTINCT FROM v_r.ack_receipt_digest
           OR (v_r.receipt::jsonb)->>(v_r.field_prefix || 'Ref') IS DISTINCT FROM v_r.ack_receipt_ref THEN
            destination := v_r.destination; event_id := v_r.event_id;
            problem := pg_catalog.format('stored receipt digest %s is not reproduced (recomputed %s)', v_r.ack_receipt_digest, v_digest);
            RETURN NEXT;
        END IF;
    END LOOP;
END
$fn$;

COMMENT ON FUNCTION outbox.verify_ack_digests(integer) IS
    'Audit sweep (D-2): re-canonicalize the receipts of acknowledged deliveries and report every stored receipt digest the database does not reproduce. Read-only.';
REVOKE ALL ON FUNCTION outbox.verify_ack_digests(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.verify_ack_digests(integer) TO outbox_auditor;

-- the event sweep also checks the stored canonical envelope text
DROP FUNCTION outbox.verify_event_digests(integer);
-- outbox.verify_event_digests(max_rows int DEFAULT 10000)
-- Purpose: the audit sweep of SPEC D-2. Recomputes, with the database's own canonicalizer,
--   the jcs-sha256-v1 digest of the envelope rebuilt from each event's stored columns (the
--   newest max_rows events) and returns one row per event whose stored digest is not
--   reproduced, or whose frozen quartet is not a registered definition. An empty result is the
--   proof that every stored digest checked is the database's own. It also reports a stored
--   canonical envelope text (D-2: what claims hand to dispatchers) that is not exactly that form.
-- Locking: none (plain reads).
-- Raises: 22023 when max_rows is outside 1..1000000.
-- Caller: outbox_auditor.
CREATE FUNCTION outbox.verify_event_digests(p_max_rows integer DEFAULT 10000)
RETURNS TABLE (event_id uuid, problem text)
LANGUAGE plpgsql SECURITY DEFINER STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_event    outbox.outbox_events%ROWTYPE;
    v_computed text;
    v_canon    text;
BEGIN
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 1000000' USING ERRCODE = '22023';
    END IF;
    FOR v_event IN SELECT * FROM outbox.outbox_events e ORDER BY e.created_at DESC, e.event_id LIMIT p_max_rows LOOP
        BEGIN
            v_canon := outbox.jcs_canonicalize(outbox._event_envelope(v_event)::json);
            v_computed := outbox._sha256_hex(v_canon);
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            event_id := v_event.event_id;
            problem := 'not_canonicalizable: ' || SQLERRM;
            RETURN NEXT;
            CONTINUE;
        END;
        IF v_computed <> v_event.event_envelope_sha256 THEN
            event_id := v_event.event_id;
            problem := format('digest_mismatch: stored %s, recomputed %s', v_event.event_envelope_sha256, v_computed);
            RETURN NEXT;
        -- the stored canonical text (D-2, what claims hand to dispatchers) must be exactly it
        ELSIF v_event.event_envelope_canonical IS DISTINCT FROM v_canon AND v_event.event_envelope_canonical IS NOT NULL THEN
            event_id := v_event.event_id;
            problem := 'canonical_text_mismatch: the stored canonical envelope is not the canonical form of the event';
            RETURN NEXT;
        END IF;
        IF v_event.event_envelope_digest_algorithm_version <> 'jcs-sha256-v1' THEN
            event_id := v_event.event_id;
            problem := 'unknown_digest_algorithm';
            RETURN NEXT;
        END IF;
    END LOOP;
END
$fn$;

COMMENT ON FUNCTION outbox.verify_event_digests(integer) IS
    'Audit sweep: events whose stored envelope digest the database''s own canonicalizer does not reproduce (SPEC D-2). Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.verify_event_digests(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.verify_event_digests(integer) TO outbox_auditor;


RESET ROLE;
