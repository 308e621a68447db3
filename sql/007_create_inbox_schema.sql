-- Consumer-side inbox: receipts and per-aggregate revision progress (SPEC §6, R-CO-1..3, §13).
-- Migrated into every database next to `outbox` (a database may be producer and consumer at
-- once); each consumer database is migrated with the same migrations.
--
-- Projection convention: consumers that build no projection use projection_name = '' and
-- projection_version = 0 (never NULL) in every key below, so one primary key serves both kinds
-- (SPEC R-CO-1). A projection consumer uses a non-empty name and a version > 0.
--
-- Access: outbox_consumer holds EXECUTE on inbox.record_receipt, inbox.observe_revision and
-- inbox.read_receipt (SECURITY DEFINER) and no privilege on any inbox table; outbox_auditor may
-- SELECT the tables. The consumer's own domain tables live elsewhere, granted to its login role.
SET LOCAL ROLE outbox_owner;

CREATE SCHEMA inbox AUTHORIZATION outbox_owner;
REVOKE ALL ON SCHEMA inbox FROM PUBLIC;
COMMENT ON SCHEMA inbox IS 'pgoutbox consumer inbox: content-addressed receipts, revision progress and gaps (SPEC §6)';

-- Receipts (R-CO-1): append-only, content-addressed, one per (consumer, projection, event).
-- receipt_document is the canonical (RFC 8785) text of the complete receipt document, with its
-- ref and digest; receipt_digest is jcs-sha256-v1 of the document minus <prefix>Ref,
-- <prefix>Digest and the time field. event_envelope_sha256 is computed by the database from
-- the envelope the consumer applied, never taken from the caller.
CREATE TABLE inbox.inbox_receipts (
    consumer_name                           text NOT NULL CHECK (consumer_name ~ '^[a-z0-9][a-z0-9._@-]*$'),
    projection_name                         text NOT NULL CHECK (projection_name = '' OR projection_name ~ '^[a-z0-9][a-z0-9._@-]*$'),
    projection_version                      integer NOT NULL CHECK (projection_version >= 0),
    event_id                                uuid NOT NULL,
    destination                             text NOT NULL CHECK (destination ~ '^[a-z0-9][a-z0-9._@-]*$'),
    receipt_kind                            text NOT NULL REFERENCES outbox.receipt_kinds (receipt_kind),
    receipt_type                            text NOT NULL,
    receipt_schema_version                  integer NOT NULL CHECK (receipt_schema_version > 0),
    receipt_ref                             text NOT NULL CHECK (receipt_ref <> '' AND pg_catalog.length(receipt_ref) <= 200),
    receipt_digest_algorithm_version        text NOT NULL CHECK (receipt_digest_algorithm_version = 'jcs-sha256-v1'),
    receipt_digest                          text NOT NULL CHECK (receipt_digest ~ '^[0-9a-f]{64}$'),
    receipt_document                        text NOT NULL,
    event_type                              text NOT NULL,
    event_schema_version                    text NOT NULL,
    aggregate_id                            text NOT NULL,
    aggregate_revision                      bigint NOT NULL CHECK (aggregate_revision > 0),
    event_envelope_digest_algorithm_version text NOT NULL CHECK (event_envelope_digest_algorithm_version = 'jcs-sha256-v1'),
    event_envelope_sha256                   text NOT NULL CHECK (event_envelope_sha256 ~ '^[0-9a-f]{64}$'),
    receipt_time                            timestamptz NOT NULL,
    recorded_at                             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, projection_name, projection_version, event_id),
    UNIQUE (consumer_name, receipt_ref),
    CHECK ((projection_name = '') = (projection_version = 0))
);
COMMENT ON TABLE inbox.inbox_receipts IS
    'Append-only content-addressed consumer receipts, unique per (consumer_name, projection_name, projection_version, event_id); projection fields are ''''/0 for non-projection consumers (SPEC R-CO-1).';
CREATE INDEX inbox_receipts_by_event ON inbox.inbox_receipts (event_id);

-- Per-aggregate revision progress (R-CO-3): the highest revision applied, contiguous from 1.
CREATE TABLE inbox.inbox_revision_progress (
    consumer_name      text NOT NULL,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    aggregate_id       text NOT NULL CHECK (aggregate_id <> ''),
    last_revision      bigint NOT NULL CHECK (last_revision > 0),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, projection_name, projection_version, aggregate_id),
    CHECK ((projection_name = '') = (projection_version = 0))
);
COMMENT ON TABLE inbox.inbox_revision_progress IS
    'Highest contiguously applied aggregate revision per (consumer, projection, aggregate); only increases (SPEC R-CO-3).';

-- Revision gaps (R-CO-3): a revision beyond progress+1 was seen. One row per missing revision
-- (expected_revision = progress+1 at the time); closed, never deleted, when that revision applies.
CREATE TABLE inbox.inbox_revision_gaps (
    consumer_name      text NOT NULL,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    aggregate_id       text NOT NULL CHECK (aggregate_id <> ''),
    expected_revision  bigint NOT NULL CHECK (expected_revision > 0),
    seen_revision      bigint NOT NULL,
    first_seen_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at       timestamptz NOT NULL DEFAULT now(),
    observation_count  integer NOT NULL DEFAULT 1 CHECK (observation_count > 0),
    closed_at          timestamptz,
    closed_by_revision bigint,
    PRIMARY KEY (consumer_name, projection_name, projection_version, aggregate_id, expected_revision),
    CHECK (seen_revision > expected_revision),
    CHECK ((closed_at IS NULL) = (closed_by_revision IS NULL)),
    CHECK (closed_by_revision IS NULL OR closed_by_revision >= expected_revision)
);
COMMENT ON TABLE inbox.inbox_revision_gaps IS
    'Recorded revision gaps: expected (missing) revision, highest revision seen beyond it, first/last seen; closed when the missing revision applies (SPEC R-CO-3).';
CREATE INDEX inbox_revision_gaps_open ON inbox.inbox_revision_gaps
    (consumer_name, projection_name, projection_version, aggregate_id) WHERE closed_at IS NULL;

-- Private helpers (granted to nobody).
-- inbox._inbox_check_key(p_consumer_name text, p_projection_name text, p_projection_version integer)
--   RETURNS void  (private helper, SPEC R-CO-1, R-CO-3)
-- Checks the (consumer, projection) part of every inbox key: the consumer name is a literal
-- (D-4); either both projection fields are empty ('' and 0: a consumer without projection) or
-- the name is a literal and the version > 0. Callers coalesce NULL to ''/0 first.
-- SQLSTATEs: 22023 invalid_parameter_value. Locking: none.
-- Caller: inbox functions running as outbox_owner only; granted to nobody.
CREATE FUNCTION inbox._inbox_check_key(p_consumer_name text, p_projection_name text, p_projection_version integer)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._@-]*$' THEN
        RAISE EXCEPTION 'inbox: invalid consumer name'
            USING ERRCODE = '22023', DETAIL = 'consumer_name must match ^[a-z0-9][a-z0-9._@-]*$ (SPEC D-4)';
    END IF;
    IF p_projection_name IS NULL OR p_projection_version IS NULL THEN
        RAISE EXCEPTION 'inbox: projection fields must not be NULL here'
            USING ERRCODE = '22023', DETAIL = 'use projection_name = '''' and projection_version = 0 for a consumer without projection';
    END IF;
    IF p_projection_name = '' THEN
        IF p_projection_version <> 0 THEN
            RAISE EXCEPTION 'inbox: projection version without projection name'
                USING ERRCODE = '22023', DETAIL = 'a consumer without projection uses projection_name = '''' and projection_version = 0';
        END IF;
    ELSIF p_projection_name !~ '^[a-z0-9][a-z0-9._@-]*$' OR p_projection_version <= 0 THEN
        RAISE EXCEPTION 'inbox: invalid projection'
            USING ERRCODE = '22023', DETAIL = 'projection_name must be a literal (SPEC D-4) and projection_version > 0';
    END IF;
END
$fn$;

COMMENT ON FUNCTION inbox._inbox_check_key(text, text, integer) IS
    'Private: validates the consumer/projection part of an inbox key (''''/0 = no projection); 22023 otherwise.';
REVOKE ALL ON FUNCTION inbox._inbox_check_key(text, text, integer) FROM PUBLIC;

-- inbox._inbox_receipt_kind(p_receipt jsonb) RETURNS outbox.receipt_kinds  (private helper, SPEC R-AK-1a)
-- The receipt kind of a receipt document, recognised by its field prefix: exactly one kind of
-- outbox.receipt_kinds must have <prefix>SchemaVersion or <prefix>DigestAlgorithmVersion (or any
-- other <prefix>Ref/<prefix>Digest) among the document's keys.
-- SQLSTATEs: OB002 receipt rejected (no kind, or fields of several kinds). Locking: none.
-- Caller: inbox.record_receipt (as outbox_owner); granted to nobody.
CREATE FUNCTION inbox._inbox_receipt_kind(p_receipt jsonb)
RETURNS outbox.receipt_kinds
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_kind  outbox.receipt_kinds;
    v_count integer;
BEGIN
    SELECT pg_catalog.count(*) INTO v_count
      FROM outbox.receipt_kinds k
     WHERE p_receipt ?| ARRAY[k.field_prefix || 'Ref', k.field_prefix || 'SchemaVersion',
                              k.field_prefix || 'DigestAlgorithmVersion', k.field_prefix || 'Digest'];
    IF v_count <> 1 THEN
        RAISE EXCEPTION 'receipt rejected: cannot tell the receipt kind'
            USING ERRCODE = 'OB002',
                  DETAIL = format('the receipt must carry the <prefix>SchemaVersion/DigestAlgorithmVersion fields of exactly one registered receipt kind; found %s', v_count),
                  HINT = 'prefixes are listed in outbox.receipt_kinds.field_prefix (SPEC R-AK-1a)';
    END IF;
    SELECT k.* INTO v_kind
      FROM outbox.receipt_kinds k
     WHERE p_receipt ?| ARRAY[k.field_prefix || 'Ref', k.field_prefix || 'SchemaVersion',
                              k.field_prefix || 'DigestAlgorithmVersion', k.field_prefix || 'Digest'];
    RETURN v_kind;
END
$fn$;

COMMENT ON FUNCTION inbox._inbox_receipt_kind(jsonb) IS
    'Private: the outbox.receipt_kinds row whose field prefix a receipt document uses; OB002 when none or several (SPEC R-AK-1a).';
REVOKE ALL ON FUNCTION inbox._inbox_receipt_kind(jsonb) FROM PUBLIC;

-- inbox._inbox_default_ref(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_id uuid) RETURNS text  (private helper, SPEC R-CO-1)
-- The repository-owned receipt ref assigned when a consumer gives none. Deterministic, so every
-- redelivery of an event names the same receipt:
--   '<consumer_name>:<event_id>'                                       (no projection)
--   '<consumer_name>:<projection_name>@<projection_version>:<event_id>' (projection consumer)
-- The Go kit (receipt.DefaultRef) uses the same formula. Raises nothing. Locking: none.
-- Caller: inbox.record_receipt (as outbox_owner); granted to nobody.
CREATE FUNCTION inbox._inbox_default_ref(p_consumer_name text, p_projection_name text,
                                         p_projection_version integer, p_event_id uuid)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN p_projection_name = ''
                THEN p_consumer_name || ':' || p_event_id::text
                ELSE p_consumer_name || ':' || p_projection_name || '@' || p_projection_version::text || ':' || p_event_id::text
           END
$fn$;

COMMENT ON FUNCTION inbox._inbox_default_ref(text, text, integer, uuid) IS
    'Private: deterministic default receipt ref <consumer>[:<projection>@<version>]:<event_id> (SPEC R-CO-1).';
REVOKE ALL ON FUNCTION inbox._inbox_default_ref(text, text, integer, uuid) FROM PUBLIC;


-- Public inbox API (SPEC §13), granted to outbox_consumer in each file.
-- inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_envelope json, p_receipt json, p_receipt_digest_candidate text DEFAULT NULL)
--   RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text)  (public, SPEC R-CO-1, §13)
-- Purpose: insert-or-compare of a consumer receipt, inside the consumer's transaction (commit it
--   with the domain mutation and the revision progress, R-CO-2).
--   * The envelope digest is the database's own, never the caller's claim (D-2): when the
--     envelope text is exactly its RFC 8785 canonical form (outbox._jcs_text_problem, the cheap
--     check shared by every hot path), its digest is sha256 of those bytes; otherwise the
--     database canonicalizes it (outbox.jcs_sha256: a pretty-printed envelope still works). Both
--     give the same digest for the same document; the receipt's eventEnvelopeSha256 must equal it.
--     The canonical-text check is what makes "sha256(bytes) = eventEnvelopeSha256" exact: without
--     it a caller could have non-canonical bytes accepted under the sha256 of those bytes, which
--     the slow path refuses and no audit could find later (the inbox does not store envelopes).
--   * The receipt document (R-AK-1a) must carry the fields of exactly one registered receipt
--     kind (outbox.receipt_kinds) and agree with the call and the envelope: <prefix>SchemaVersion
--     = the kind's version, <prefix>DigestAlgorithmVersion and eventEnvelopeDigestAlgorithmVersion
--     = 'jcs-sha256-v1', consumerName = p_consumer_name, eventId = the envelope's, a registered
--     destination must map to this consumer and kind, projectionName/projectionVersion = the
--     call's (required for operations_projection, forbidden without projection), eventType and
--     eventSchemaVersion = the envelope's (required for operations_projection), the time field
--     (appliedAt/committedAt/publishedAt) a UTC RFC 3339 time with 6 fractional digits and Z.
--   * Receipts are closed documents (R-AK-1a): besides the common members (<prefix>Ref,
--     <prefix>SchemaVersion, <prefix>DigestAlgorithmVersion, <prefix>Digest, destination,
--     consumerName, eventId, eventEnvelopeDigestAlgorithmVersion, eventEnvelopeSha256, the time
--     field) exactly the members outbox.receipt_kind_members registers for the kind, with their
--     JSON types; the required ones must be present. Any other member is OB002 naming it.
--   * <prefix>Ref: optional; when absent the deterministic inbox._inbox_default_ref is assigned.
--     <prefix>Digest: optional; when present it must equal jcs-sha256-v1 of the candidate (the
--     document minus <prefix>Ref, <prefix>Digest and the time field), when absent it is filled
--     in. The stored document is the canonical text of the complete receipt; read_receipt
--     returns it byte for byte.
-- Digest paths (D-2 "hot path for receipts"; the hot path accepts exactly what the slow path
--   accepts and refuses with the same SQLSTATE):
--   * slow path (p_receipt_digest_candidate NULL): the database canonicalizes the receipt
--     (OB201 when it cannot), computes the digest of the candidate with outbox.jcs_sha256 and
--     stores the canonical text (re-canonicalized only when it filled in the ref or digest).
--   * hot path (the consumer kit): the caller passes the receipt as its canonical text and the
--     canonical text of the candidate. The receipt text is checked with outbox._jcs_text_problem
--     (not canonical: the slow path's canonicalizer decides, OB201 or its canonical text); it is
--     then stored as is, so nothing is serialized here. The candidate is not parsed: with the
--     receipt's canonical text R at hand and the receipt a flat object of strings, integers and
--     booleans (closed, checked above), the canonical candidate is R with the members
--     "<prefix>Ref":"...", "<prefix>Digest":"..." and "<time>":"..." cut out (a raw '"' never occurs
--     inside a JSON string, so ',"name":' only matches a member), and the passed candidate must
--     be exactly that text. This accepts exactly when _jcs_text_problem(candidate) IS NULL and
--     candidate::jsonb = receipt::jsonb - <prefix>Ref - <prefix>Digest - <time> (a canonical form
--     is unique), at the cost of three replace() calls instead of a third text check; a refused
--     candidate is classified like that: OB201 when it is not canonical text, else OB002. The
--     digest is sha256 of the candidate bytes. A complete receipt is stored as R; one whose ref
--     or digest was filled in is re-canonicalized (the kit always passes complete receipts).
--   * inbox.verify_receipt_digests() re-canonicalizes stored receipts and reports mismatches.
--   * Outcomes: 'new' (inserted); 'existing' (a receipt for this consumer/projection/event with
--     the same envelope digest exists: the FIRST receipt's ref and digest are returned and
--     nothing is written). The complete first document is read with inbox.read_receipt.
-- Locking: the primary key (and the (consumer_name, receipt_ref) key) serialise concurrent
--   inserts of the same receipt: INSERT .. ON CONFLICT DO NOTHING waits for the other
--   transaction, then compares against the committed row (READ COMMITTED).
-- SQLSTATEs: OB301 same event id with a different envelope digest (receipt conflict);
--   OB002 receipt document invalid, not closed or inconsistent with the call/envelope/registry,
--   a digest candidate that is not the receipt's, or a ref that already names another receipt;
--   OB105 envelope lacks a usable eventId/eventType/eventSchemaVersion/aggregateId/
--   aggregateRevision; OB201 a document (envelope, receipt or candidate) is not canonicalizable
--   or a passed candidate is not canonical text; 22023 invalid consumer/projection key.
-- Caller: outbox_consumer (the consumer's login role), SECURITY DEFINER: it has no table grants.
CREATE FUNCTION inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                     p_event_envelope json, p_receipt json,
                                     p_receipt_digest_candidate text DEFAULT NULL)
RETURNS TABLE (outcome text, receipt_ref text, receipt_digest text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
    v_env                jsonb;
    v_env_sha            text;
    v_event_id           uuid;
    v_rtext              text;
    v_doc                jsonb;
    v_kind               outbox.receipt_kinds;
    v_p                  text;
    v_dest               outbox.delivery_destinations;
    v_member             text;
    v_problem            text;
    v_time_text          text;
    v_time               timestamptz;
    v_ref                text;
    v_digest             text;
    v_expected           text;
    v_cut                text;
    v_complete           boolean;
    v_text               text;
    v_inserted           boolean;
    v_existing           inbox.inbox_receipts;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);

    -- The envelope digest (D-2): sha256 of the bytes when they are canonical, else canonicalized
    -- here (OB201 if not canonicalizable). Either way jcs-sha256-v1 of the envelope.
    IF p_event_envelope IS NULL OR pg_catalog.json_typeof(p_event_envelope) <> 'object' THEN
        RAISE EXCEPTION 'envelope invalid: not a JSON object' USING ERRCODE = 'OB105';
    END IF;
    IF outbox._jcs_text_problem(p_event_envelope::text) IS NULL THEN
        v_env_sha := outbox._sha256_hex(p_event_envelope::text);
    ELSE
        v_env_sha := outbox.jcs_sha256(p_event_envelope);
    END IF;
    v_env := p_event_envelope::jsonb;
    IF pg_catalog.jsonb_typeof(v_env -> 'eventId') IS DISTINCT FROM 'string'
       OR (v_env ->> 'eventId') !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'envelope invalid: eventId'
            USING ERRCODE = 'OB105', DETAIL = 'eventId must be a lower-case UUID string';
    END IF;
    v_event_id := (v_env ->> 'eventId')::uuid;
    IF pg_catalog.jsonb_typeof(v_env -> 'eventType') IS DISTINCT FROM 'string'
       OR pg_catalog.jsonb_typeof(v_env -> 'eventSchemaVersion') IS DISTINCT FROM 'string'
       OR pg_catalog.jsonb_typeof(v_env -> 'aggregateId') IS DISTINCT FROM 'string'
       OR (v_env ->> 'aggregateId') = ''
       OR pg_catalog.jsonb_typeof(v_env -> 'aggregateRevision') IS DISTINCT FROM 'number'
       OR (v_env ->> 'aggregateRevision') !~ '^[1-9][0-9]{0,15}$' THEN
        RAISE EXCEPTION 'envelope invalid: identity fields'
            USING ERRCODE = 'OB105',
                  DETAIL = format('event %s: eventType, eventSchemaVersion, aggregateId (strings) and aggregateRevision (integer > 0) are required', v_event_id);
    END IF;

    -- The receipt document and its canonical text (OB201 on duplicate keys or unsafe numbers).
    IF p_receipt IS NULL OR pg_catalog.json_typeof(p_receipt) <> 'object' THEN
        RAISE EXCEPTION 'receipt rejected: not a JSON object' USING ERRCODE = 'OB002';
    END IF;
    IF p_receipt_digest_candidate IS NOT NULL AND outbox._jcs_text_problem(p_receipt::text) IS NULL THEN
        v_rtext := p_receipt::text;
    ELSE
        v_rtext := outbox.jcs_canonicalize(p_receipt);
    END IF;
    v_doc := p_receipt::jsonb;
    v_kind := inbox._inbox_receipt_kind(v_doc);
    v_p := v_kind.field_prefix;

    -- Closed document (R-AK-1a): the common members and the kind's registered members only.
    SELECT pg_catalog.format('%s %s', CASE WHEN m.member IS NULL THEN 'unknown member' ELSE 'member' END,
                             pg_catalog.to_json(e.key)::text)
           || CASE WHEN m.member IS NULL
                   THEN pg_catalog.format(': %s receipts carry only the common members and those of outbox.receipt_kind_members', v_kind.receipt_kind)
                   ELSE pg_catalog.format(' must be a JSON %s', m.json_type) END
      INTO v_problem
      FROM pg_catalog.jsonb_each(v_doc) AS e
      LEFT JOIN outbox.receipt_kind_members AS m ON m.receipt_kind = v_kind.receipt_kind AND m.member = e.key
     WHERE e.key <> ALL (ARRAY[v_p || 'Ref', v_p || 'SchemaVersion', v_p || 'DigestAlgorithmVersion', v_p || 'Digest',
                              'destination', 'consumerName', 'eventId', 'eventEnvelopeDigestAlgorithmVersion',
                              'eventEnvelopeSha256', v_kind.time_field])
       AND (m.member IS NULL
            OR pg_catalog.jsonb_typeof(e.value) <> CASE m.json_type WHEN 'integer' THEN 'number' ELSE m.json_type END)
     ORDER BY e.key COLLATE "C"
     LIMIT 1;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'receipt rejected: not a closed % receipt', v_kind.receipt_kind
            USING ERRCODE = 'OB002', DETAIL = v_problem, HINT = 'SPEC R-AK-1a: receipts are closed documents';
    END IF;
    SELECT pg_catalog.string_agg(m.member, ', ' ORDER BY m.member COLLATE "C") INTO v_problem
      FROM outbox.receipt_kind_members AS m
     WHERE m.receipt_kind = v_kind.receipt_kind AND m.required AND NOT v_doc ? m.member;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'receipt rejected: % receipts carry %', v_kind.receipt_kind, v_problem
            USING ERRCODE = 'OB002', DETAIL = format('missing required member(s): %s', v_problem),
                  HINT = 'SPEC R-AK-1a: the required members of outbox.receipt_kind_members';
    END IF;

    IF v_doc -> (v_p || 'SchemaVersion') IS DISTINCT FROM pg_catalog.to_jsonb(v_kind.receipt_schema_version) THEN
        RAISE EXCEPTION 'receipt rejected: %SchemaVersion', v_p
            USING ERRCODE = 'OB002', DETAIL = format('%s receipts use schema version %s', v_kind.receipt_kind, v_kind.receipt_schema_version);
    END IF;
    IF v_doc -> (v_p || 'DigestAlgorithmVersion') IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb
       OR v_doc -> 'eventEnvelopeDigestAlgorithmVersion' IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb THEN
        RAISE EXCEPTION 'receipt rejected: digest algorithm'
            USING ERRCODE = 'OB002', DETAIL = 'receipt and envelope digests use jcs-sha256-v1';
    END IF;
    IF v_doc -> 'consumerName' IS DISTINCT FROM pg_catalog.to_jsonb(p_consumer_name) THEN
        RAISE EXCEPTION 'receipt rejected: consumerName'
            USING ERRCODE = 'OB002', DETAIL = format('the receipt must name consumer %s', p_consumer_name);
    END IF;
    IF pg_catalog.jsonb_typeof(v_doc -> 'destination') IS DISTINCT FROM 'string'
       OR (v_doc ->> 'destination') !~ '^[a-z0-9][a-z0-9._@-]*$' THEN
        RAISE EXCEPTION 'receipt rejected: destination' USING ERRCODE = 'OB002', DETAIL = 'destination must be a literal (SPEC D-4)';
    END IF;
    -- A destination registered in this database must map to this consumer and receipt kind.
    SELECT d.* INTO v_dest FROM outbox.delivery_destinations d WHERE d.destination = v_doc ->> 'destination';
    IF FOUND AND (v_dest.consumer_name <> p_consumer_name OR v_dest.receipt_kind <> v_kind.receipt_kind) THEN
        RAISE EXCEPTION 'receipt rejected: destination %', v_doc ->> 'destination'
            USING ERRCODE = 'OB002',
                  DETAIL = format('destination %s is registered for consumer %s with receipt kind %s',
                                  v_dest.destination, v_dest.consumer_name, v_dest.receipt_kind);
    END IF;
    IF v_doc -> 'eventId' IS DISTINCT FROM v_env -> 'eventId' THEN
        RAISE EXCEPTION 'receipt rejected: eventId'
            USING ERRCODE = 'OB002', DETAIL = format('the receipt must name event %s', v_event_id);
    END IF;
    IF v_doc -> 'eventEnvelopeSha256' IS DISTINCT FROM pg_catalog.to_jsonb(v_env_sha) THEN
        RAISE EXCEPTION 'receipt rejected: eventEnvelopeSha256'
            USING ERRCODE = 'OB002',
                  DETAIL = format('event %s: the receipt''s envelope digest differs from the digest the database computes (%s)', v_event_id, v_env_sha);
    END IF;

    -- Projection coordinates: the call's, never the receipt's own claim.
    IF v_projection_name <> '' OR v_kind.receipt_kind = 'operations_projection' THEN
        IF v_projection_name = '' THEN
            RAISE EXCEPTION 'receipt rejected: % receipts need a projection', v_kind.receipt_kind
                USING ERRCODE = 'OB002', DETAIL = 'call record_receipt with the projection name and version the consumer builds';
        END IF;
        IF v_doc -> 'projectionName' IS DISTINCT FROM pg_catalog.to_jsonb(v_projection_name)
           OR v_doc -> 'projectionVersion' IS DISTINCT FROM pg_catalog.to_jsonb(v_projection_version) THEN
            RAISE EXCEPTION 'receipt rejected: projection'
                USING ERRCODE = 'OB002', DETAIL = format('the receipt must name projection %s version %s', v_projection_name, v_projection_version);
        END IF;
    ELSIF v_doc ? 'projectionName' OR v_doc ? 'projectionVersion' THEN
        RAISE EXCEPTION 'receipt rejected: projection fields without a projection'
            USING ERRCODE = 'OB002', DETAIL = 'a consumer without projection records projection_name = '''' and projection_version = 0';
    END IF;
    IF (v_doc ? 'eventType' AND v_doc -> 'eventType' IS DISTINCT FROM v_env -> 'eventType')
       OR (v_doc ? 'eventSchemaVersion' AND v_doc -> 'eventSchemaVersion' IS DISTINCT FROM v_env -> 'eventSchemaVersion') THEN
        RAISE EXCEPTION 'receipt rejected: eventType/eventSchemaVersion'
            USING ERRCODE = 'OB002', DETAIL = format('event %s: the receipt''s event type/schema differ from the envelope''s', v_event_id);
    END IF;

    -- The time field.
    v_time_text := v_doc ->> v_kind.time_field;
    IF pg_catalog.jsonb_typeof(v_doc -> v_kind.time_field) IS DISTINCT FROM 'string'
       OR v_time_text !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN
        RAISE EXCEPTION 'receipt rejected: %', v_kind.time_field
            USING ERRCODE = 'OB002', DETAIL = 'a UTC RFC 3339 time with exactly six fractional digits and Z';
    END IF;
    BEGIN
        v_time := v_time_text::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        RAISE EXCEPTION 'receipt rejected: %', v_kind.time_field
            USING ERRCODE = 'OB002', DETAIL = 'not a valid time';
    END;

    -- Ref: the consumer's (checked here), or the deterministic default (assigned below).
    IF v_doc ? (v_p || 'Ref') THEN
        IF pg_catalog.jsonb_typeof(v_doc -> (v_p || 'Ref')) IS DISTINCT FROM 'string'
           OR (v_doc ->> (v_p || 'Ref')) = '' OR pg_catalog.length(v_doc ->> (v_p || 'Ref')) > 200 THEN
            RAISE EXCEPTION 'receipt rejected: %Ref', v_p
                USING ERRCODE = 'OB002', DETAIL = 'a non-empty string of at most 200 characters';
        END IF;
        v_ref := v_doc ->> (v_p || 'Ref');
    END IF;
    IF v_doc ? (v_p || 'Digest')
       AND (pg_catalog.jsonb_typeof(v_doc -> (v_p || 'Digest')) IS DISTINCT FROM 'string'
            OR (v_doc ->> (v_p || 'Digest')) !~ '^[0-9a-f]{64}$') THEN
        RAISE EXCEPTION 'receipt rejected: %Digest', v_p
            USING ERRCODE = 'OB002', DETAIL = 'a jcs-sha256-v1 digest: 64 lower-case hex digits';
    END IF;
    v_complete := v_doc ? (v_p || 'Ref') AND v_doc ? (v_p || 'Digest');

    -- Digest of the candidate (the document minus <prefix>Ref, <prefix>Digest and the time).
    IF p_receipt_digest_candidate IS NULL THEN
        v_digest := outbox.jcs_sha256((v_doc - (v_p || 'Ref') - (v_p || 'Digest') - v_kind.time_field)::json);
    ELSE
        -- v_rtext is canonical and flat (closed: string, integer and boolean members only); cut
        -- the three string members out of it (see the header).
        v_expected := v_rtext;
        FOREACH v_member IN ARRAY ARRAY[v_p || 'Ref', v_p || 'Digest', v_kind.time_field] LOOP
            CONTINUE WHEN NOT v_doc ? v_member;
            v_cut := pg_catalog.to_json(v_member)::text || ':' || pg_catalog.to_json(v_doc ->> v_member)::text;
            IF pg_catalog.strpos(v_expected, ',' || v_cut) > 0 THEN
                v_expected := pg_catalog.replace(v_expected, ',' || v_cut, '');
            ELSE
                v_expected := pg_catalog.replace(v_expected, '{' || v_cut || ',', '{');
            END IF;
        END LOOP;
        IF p_receipt_digest_candidate IS DISTINCT FROM v_expected THEN
            v_problem := outbox._jcs_text_problem(p_receipt_digest_candidate);
            IF v_problem IS NOT NULL THEN
                RAISE EXCEPTION 'receipt digest candidate is not canonical text'
                    USING ERRCODE = 'OB201', DETAIL = v_problem,
                          HINT = 'pass the RFC 8785 canonical text of the candidate, or no candidate (SPEC D-2)';
            END IF;
            RAISE EXCEPTION 'receipt rejected: digest candidate'
                USING ERRCODE = 'OB002',
                      DETAIL = format('event %s: the digest candidate is not the receipt minus %sRef, %sDigest and %s', v_event_id, v_p, v_p, v_kind.time_field);
        END IF;
        v_digest := outbox._sha256_hex(p_receipt_digest_candidate);
    END IF;
    IF v_doc ? (v_p || 'Digest') AND (v_doc ->> (v_p || 'Digest')) <> v_digest THEN
        RAISE EXCEPTION 'receipt rejected: %Digest', v_p
            USING ERRCODE = 'OB002',
                  DETAIL = format('event %s: the receipt digest differs from jcs-sha256-v1 of its candidate (%s)', v_event_id, v_digest);
    END IF;

    -- The stored text: the canonical text of the complete receipt.
    IF v_complete THEN
        v_text := v_rtext;
    ELSE
        IF v_ref IS NULL THEN
            v_ref := inbox._inbox_default_ref(p_consumer_name, v_projection_name, v_projection_version, v_event_id);
            v_doc := v_doc || pg_catalog.jsonb_build_object(v_p || 'Ref', v_ref);
        END IF;
        v_doc := v_doc || pg_catalog.jsonb_build_object(v_p || 'Digest', v_digest);
        v_text := outbox.jcs_canonicalize(v_doc::json);
    END IF;

    -- Insert-or-compare.
    INSERT INTO inbox.inbox_receipts AS r
           (consumer_name, projection_name, projection_version, event_id, destination, receipt_kind,
            receipt_type, receipt_schema_version, receipt_ref, receipt_digest_algorithm_version,
            receipt_digest, receipt_document, event_type, event_schema_version, aggregate_id,
            aggregate_revision, event_envelope_digest_algorithm_version, event_envelope_sha256, receipt_time)
    VALUES (p_consumer_name, v_projection_name, v_projection_version, v_event_id, v_doc ->> 'destination',
            v_kind.receipt_kind, v_kind.receipt_type, v_kind.receipt_schema_version, v_ref, 'jcs-sha256-v1',
            v_digest, v_text, v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_env ->> 'aggregateId',
            (v_env ->> 'aggregateRevision')::bigint, 'jcs-sha256-v1', v_env_sha, v_time)
    ON CONFLICT DO NOTHING
    RETURNING true INTO v_inserted;

    IF v_inserted THEN
        RETURN QUERY SELECT 'new'::text, v_ref, v_digest;
        RETURN;
    END IF;

    SELECT r.* INTO v_existing
      FROM inbox.inbox_receipts r
     WHERE r.consumer_name = p_consumer_name AND r.projection_name = v_projection_name
       AND r.projection_version = v_projection_version AND r.event_id = v_event_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'receipt rejected: ref % already names another receipt', v_ref
            USING ERRCODE = 'OB002', DETAIL = format('consumer %s: receipt refs are unique per consumer', p_consumer_name);
    END IF;
    IF v_existing.event_envelope_digest_algorithm_version <> 'jcs-sha256-v1'
       OR v_existing.event_envelope_sha256 <> v_env_sha THEN
        RAISE EXCEPTION 'receipt conflict: event % was already received with a different envelope digest', v_event_id
            USING ERRCODE = 'OB301',
                  DETAIL = format('consumer %s projection %s@%s: recorded %s, now %s', p_consumer_name, v_projection_name,
                                  v_projection_version, v_existing.event_envelope_sha256, v_env_sha),
                  HINT = 'same event id with different content: an integrity conflict, never retried (SPEC R-CO-1)';
    END IF;
    RETURN QUERY SELECT 'existing'::text, v_existing.receipt_ref, v_existing.receipt_digest;
END
$fn$;

COMMENT ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text) IS
    'Insert-or-compare of a content-addressed, closed consumer receipt: new | existing (first receipt''s ref/digest); OB301 same event id with a different envelope digest; OB002 inconsistent or open receipt, or a candidate that is not the receipt''s; OB201 not canonicalizable (hot path: candidate not canonical text). SPEC R-CO-1, R-AK-1a, D-2, §13.';
REVOKE ALL ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text) TO outbox_consumer;

-- inbox.read_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_id uuid, p_event_envelope_sha256 text) RETURNS json  (public, SPEC R-CO-1, R-AK-8)
-- Purpose: the consumer's own first receipt for an event, so that a redelivery answers with the
--   SAME receipt document and ack it answered the first time, without applying again. Returns
--   the stored canonical receipt document, or NULL when this consumer/projection has no receipt
--   for the event. Read-only: it writes nothing, so the digest it compares is the caller's
--   (the consumer kit computes it from the bytes it received); inbox.record_receipt, which
--   writes, computes its own.
-- Locking: none (a plain read; READ COMMITTED callers see receipts committed before the call).
-- SQLSTATEs: OB301 a receipt for this event id exists with a different envelope digest;
--   22023 invalid consumer/projection key or digest.
-- Caller: outbox_consumer, SECURITY DEFINER: it has no table grants.
CREATE FUNCTION inbox.read_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                   p_event_id uuid, p_event_envelope_sha256 text)
RETURNS json
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
    v_sha                text;
    v_doc                text;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    IF p_event_id IS NULL OR p_event_envelope_sha256 IS NULL OR p_event_envelope_sha256 !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'inbox: event id and a 64 hex digit envelope digest are required' USING ERRCODE = '22023';
    END IF;
    SELECT r.event_envelope_sha256, r.receipt_document INTO v_sha, v_doc
      FROM inbox.inbox_receipts r
     WHERE r.consumer_name = p_consumer_name AND r.projection_name = v_projection_name
       AND r.projection_version = v_projection_version AND r.event_id = p_event_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_sha <> p_event_envelope_sha256 THEN
        RAISE EXCEPTION 'receipt conflict: event % was already received with a different envelope digest', p_event_id
            USING ERRCODE = 'OB301',
                  DETAIL = format('consumer %s projection %s@%s: recorded %s, now %s', p_consumer_name, v_projection_name,
                                  v_projection_version, v_sha, p_event_envelope_sha256),
                  HINT = 'same event id with different content: an integrity conflict, never retried (SPEC R-CO-1)';
    END IF;
    RETURN v_doc::json;
END
$fn$;

COMMENT ON FUNCTION inbox.read_receipt(text, text, integer, uuid, text) IS
    'The stored canonical receipt document of a consumer/projection for an event (NULL when none); OB301 when recorded with a different envelope digest. SPEC R-CO-1, R-AK-8.';
REVOKE ALL ON FUNCTION inbox.read_receipt(text, text, integer, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.read_receipt(text, text, integer, uuid, text) TO outbox_consumer;

-- inbox.observe_revision(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_aggregate_id text, p_aggregate_revision bigint) RETURNS text  (public, SPEC R-CO-3, §13)
-- Purpose: the per-aggregate revision check of an ordered consumer, inside its transaction.
--   'apply'     revision = progress+1 (or 1 with no progress): progress advanced to this
--               revision and every open gap it fills closed (closed_at, closed_by_revision);
--               commit it with the receipt and the domain mutation (R-CO-2), or roll it all back.
--   'duplicate' revision <= progress: nothing written (the consumer answers with its receipt).
--   'gap'       revision > progress+1: the gap row (expected = progress+1, highest seen
--               revision, first/last seen, count) is inserted or updated; progress unchanged,
--               nothing else written. The consumer commits that alone and answers retryable
--               awaiting_revision, writing no receipt (R-CO-3).
-- Locking: the progress row FOR UPDATE; while an aggregate has no progress row yet, a
--   transaction-level advisory lock on the key stands in for it. Observations of one aggregate
--   therefore serialise until the observing transaction ends. READ COMMITTED is assumed.
-- SQLSTATEs: OB105 empty aggregate id or revision <= 0; 22023 invalid consumer/projection key.
-- Caller: outbox_consumer, SECURITY DEFINER: it has no table grants.
CREATE FUNCTION inbox.observe_revision(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                       p_aggregate_id text, p_aggregate_revision bigint)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
    v_last               bigint;
    v_has_row            boolean := true;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    IF p_aggregate_id IS NULL OR p_aggregate_id = '' OR p_aggregate_revision IS NULL OR p_aggregate_revision <= 0 THEN
        RAISE EXCEPTION 'envelope invalid: aggregate id and revision'
            USING ERRCODE = 'OB105', DETAIL = 'aggregateId must be non-empty and aggregateRevision > 0';
    END IF;

    SELECT p.last_revision INTO v_last
      FROM inbox.inbox_revision_progress p
     WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
       AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id
       FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(
            pg_catalog.concat_ws(pg_catalog.chr(31), 'inbox.observe_revision', p_consumer_name,
                                 v_projection_name, v_projection_version::text, p_aggregate_id), 0));
        -- A new statement: sees a progress row committed while we waited.
        SELECT p.last_revision INTO v_last
          FROM inbox.inbox_revision_progress p
         WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
           AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id
           FOR UPDATE;
        IF NOT FOUND THEN
            v_last := 0;
            v_has_row := false;
        END IF;
    END IF;

    IF p_aggregate_revision <= v_last THEN
        RETURN 'duplicate';
    END IF;

    IF p_aggregate_revision = v_last + 1 THEN
        IF v_has_row THEN
            UPDATE inbox.inbox_revision_progress p
               SET last_revision = p_aggregate_revision, updated_at = pg_catalog.now()
             WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
               AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id;
        ELSE
            INSERT INTO inbox.inbox_revision_progress
                   (consumer_name, projection_name, projection_version, aggregate_id, last_revision)
            VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, p_aggregate_revision);
        END IF;
        UPDATE inbox.inbox_revision_gaps g
           SET closed_at = pg_catalog.now(), closed_by_revision = p_aggregate_revision
         WHERE g.consumer_name = p_consumer_name AND g.projection_name = v_projection_name
           AND g.projection_version = v_projection_version AND g.aggregate_id = p_aggregate_id
           AND g.closed_at IS NULL AND g.expected_revision <= p_aggregate_revision;
        RETURN 'apply';
    END IF;

    INSERT INTO inbox.inbox_revision_gaps AS g
           (consumer_name, projection_name, projection_version, aggregate_id, expected_revision, seen_revision)
    VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, v_last + 1, p_aggregate_revision)
    ON CONFLICT (consumer_name, projection_name, projection_version, aggregate_id, expected_revision) DO UPDATE
       SET seen_revision = GREATEST(g.seen_revision, EXCLUDED.seen_revision),
           last_seen_at = pg_catalog.now(),
           observation_count = g.observation_count + 1;
    RETURN 'gap';
END
$fn$;

COMMENT ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint) IS
    'Per-aggregate revision check of an ordered consumer: apply (progress advanced, gaps closed) | duplicate | gap (gap recorded, nothing else). SPEC R-CO-3, §13.';
REVOKE ALL ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint) TO outbox_consumer;


-- Append-only receipts, monotonic progress, closed gaps immutable (SPEC R-SEC-3).
-- Receipts are append-only (SPEC R-SEC-3, R-RT-2): no UPDATE, DELETE or TRUNCATE, whoever the
-- role (the owner included). A receipt is corrected by never being wrong: insert-or-compare.
CREATE FUNCTION inbox.tg_inbox_receipts__append_only() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_receipts is not allowed', TG_OP
        USING ERRCODE = 'OB202',
              DETAIL = 'receipts are append-only (SPEC R-SEC-3); receipts referenced by acks are never deleted (R-RT-2)';
END
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_receipts__append_only() FROM PUBLIC;

CREATE TRIGGER tg_inbox_receipts__append_only BEFORE UPDATE OR DELETE ON inbox.inbox_receipts
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_receipts__append_only();
CREATE TRIGGER tg_inbox_receipts__append_only_truncate BEFORE TRUNCATE ON inbox.inbox_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_receipts__append_only();

-- Revision progress only moves forward (SPEC R-CO-3): an UPDATE must keep the key and raise
-- last_revision; DELETE and TRUNCATE are refused. A rebuilt projection uses a new version.
CREATE FUNCTION inbox.tg_inbox_revision_progress__monotonic() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE'
       AND (NEW.consumer_name, NEW.projection_name, NEW.projection_version, NEW.aggregate_id)
           IS NOT DISTINCT FROM (OLD.consumer_name, OLD.projection_name, OLD.projection_version, OLD.aggregate_id)
       AND NEW.last_revision > OLD.last_revision THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_revision_progress is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'revision progress only increases, through inbox.observe_revision (SPEC R-CO-3)';
END
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_revision_progress__monotonic() FROM PUBLIC;

CREATE TRIGGER tg_inbox_revision_progress__monotonic BEFORE UPDATE OR DELETE ON inbox.inbox_revision_progress
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_revision_progress__monotonic();
CREATE TRIGGER tg_inbox_revision_progress__monotonic_truncate BEFORE TRUNCATE ON inbox.inbox_revision_progress
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_revision_progress__monotonic();

-- Gap records are kept (SPEC R-CO-3, R-OP-2): an open gap may only see later observations
-- (seen_revision up, last_seen_at, observation_count) and be closed once; a closed gap never
-- changes; no gap is deleted or truncated.
CREATE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.closed_at IS NULL
       AND (NEW.consumer_name, NEW.projection_name, NEW.projection_version, NEW.aggregate_id,
            NEW.expected_revision, NEW.first_seen_at)
           IS NOT DISTINCT FROM
           (OLD.consumer_name, OLD.projection_name, OLD.projection_version, OLD.aggregate_id,
            OLD.expected_revision, OLD.first_seen_at)
       AND NEW.seen_revision >= OLD.seen_revision
       AND NEW.observation_count >= OLD.observation_count THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_revision_gaps is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'gap records are kept; only an open gap changes, through inbox.observe_revision (SPEC R-CO-3)';
END
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable() FROM PUBLIC;

CREATE TRIGGER tg_inbox_revision_gaps__closed_immutable BEFORE UPDATE OR DELETE ON inbox.inbox_revision_gaps
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();
CREATE TRIGGER tg_inbox_revision_gaps__closed_immutable_truncate BEFORE TRUNCATE ON inbox.inbox_revision_gaps
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();


-- Grants (SPEC R-SEC-1): the consumer reaches the schema only for its functions; the auditor reads.
GRANT USAGE ON SCHEMA inbox TO outbox_consumer, outbox_auditor;
GRANT SELECT ON inbox.inbox_receipts, inbox.inbox_revision_progress, inbox.inbox_revision_gaps TO outbox_auditor;

RESET ROLE;
