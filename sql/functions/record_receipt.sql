{{- /* Rendered with (dict "build_token" true) by 031_projection_versions.sql and every later
       migration that re-includes this file: the seven-argument signature with p_build_token.
       The migrations released before 030 (007, 011, 012, 019) include it with their own data and
       get the six-argument signature they drop and recreate by name; p_build_token is then a
       NULL local. docs/migrations.md rule 4. */ -}}
{{- $bt := and (kindIs "map" .) (hasKey . "build_token") -}}
-- inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_envelope json, p_receipt json, p_receipt_digest_candidate text DEFAULT NULL,
--   p_build_token uuid DEFAULT NULL)
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
--   * Projection version (SPEC §11b R-PV-1): a call that names a projection needs its version
--     registered (outbox.projection_versions; OB802 unregistered or retired). An active or
--     frozen version takes no build token (the versions live deliveries are frozen to: their
--     receipts are unchanged); a shadow version needs the token of its live build
--     (outbox.start_shadow_build), missing or stale -> OB001; a token for an active/frozen
--     version -> OB001, a token without a projection -> 22023. The state comes from the same
--     statement that reads the receipt's destination (one primary-key probe, no extra statement
--     on the hot path); anything but "active/frozen, no token" goes to
--     inbox._inbox_check_version, which decides and locks a shadow version FOR SHARE.
--   * Outcomes: 'new' (inserted); 'existing' (a receipt for this consumer/projection/event with
--     the same envelope digest exists: the FIRST receipt's ref and digest are returned and
--     nothing is written). The complete first document is read with inbox.read_receipt.
-- Locking: the primary key (and the (consumer_name, receipt_ref) key) serialise concurrent
--   inserts of the same receipt: INSERT .. ON CONFLICT DO NOTHING waits for the other
--   transaction, then compares against the committed row (READ COMMITTED).
-- SQLSTATEs: 42501 the calling role is not bound to consumer_name (inbox.consumer_roles, R-SEC-5);
--   OB301 same event id with a different envelope digest (receipt conflict);
--   OB002 receipt document invalid, not closed or inconsistent with the call/envelope/registry,
--   a digest candidate that is not the receipt's, or a ref that already names another receipt;
--   OB105 envelope lacks a usable eventId/eventType/eventSchemaVersion/aggregateId/
--   aggregateRevision; OB201 a document (envelope, receipt or candidate) is not canonicalizable
--   or a passed candidate is not canonical text; 22023 invalid consumer/projection key or a build
--   token without a projection; OB802 projection version not registered or retired; OB001 a
--   shadow version without its live build token, or a token for an active/frozen version.
-- Caller: outbox_consumer (the consumer's login role), SECURITY DEFINER: it has no table grants.
CREATE FUNCTION inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                     p_event_envelope json, p_receipt json,
                                     p_receipt_digest_candidate text DEFAULT NULL{{ if $bt }},
                                     p_build_token uuid DEFAULT NULL{{ end }})
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
    v_dest_consumer      text;
    v_dest_kind          text;
    v_version_state      text;
{{- if not $bt }}
    p_build_token        uuid;  -- the six-argument rendering: no token
{{- end }}
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
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role

    -- The envelope digest (D-2): sha256 of the bytes when they are canonical, else canonicalized
    -- here (OB201 if not canonicalizable). Either way jcs-sha256-v1 of the envelope.
    IF p_event_envelope IS NULL OR pg_catalog.json_typeof(p_event_envelope) <> 'object' THEN
        RAISE EXCEPTION 'envelope invalid: not a JSON object' USING ERRCODE = 'OB105';
    END IF;
    -- R-SEC-5: bounded inputs (an envelope the kernel appended is at most max_payload_bytes plus
    -- the generated eventId/occurredAt; a receipt is a small closed document).
    IF pg_catalog.octet_length(p_event_envelope::text)
       > coalesce((SELECT k.value FROM outbox.kernel_settings AS k WHERE k.name = 'max_payload_bytes'), 1048576) + 1024 THEN
        RAISE EXCEPTION 'envelope invalid: larger than max_payload_bytes'
            USING ERRCODE = 'OB105', DETAIL = 'the envelope is larger than any event append_event accepts (outbox.kernel_settings max_payload_bytes)';
    END IF;
    IF p_receipt IS NOT NULL AND pg_catalog.octet_length(p_receipt::text) > 65536 THEN
        RAISE EXCEPTION 'receipt rejected: larger than 65536 bytes' USING ERRCODE = 'OB002';
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

    -- integer form (R-AK-1a): 1.0 or 1e0 is refused; read from the json text (jsonb prints 1e0 as 1)
    SELECT pg_catalog.format('%s %s must be an integer written without fraction or exponent', k.k, p_receipt->>k.k)
      INTO v_problem
      FROM (SELECT v_p || 'SchemaVersion' AS k
            UNION ALL
            SELECT m.member FROM outbox.receipt_kind_members AS m
             WHERE m.receipt_kind = v_kind.receipt_kind AND m.json_type = 'integer' AND v_doc ? m.member) AS k
     WHERE p_receipt->>k.k !~ '^-?(0|[1-9][0-9]*)$'
     LIMIT 1;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'receipt rejected: integer form'
            USING ERRCODE = 'OB002', DETAIL = v_problem, HINT = 'SPEC R-AK-1a: integer members are JSON integers';
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
    -- A destination registered in this database must map to this consumer and receipt kind; the
    -- same statement reads the projection version's state (R-PV-1: one probe, no extra statement).
    SELECT d.consumer_name, d.receipt_kind, pv.state
      INTO v_dest_consumer, v_dest_kind, v_version_state
      FROM (SELECT) AS one
      LEFT JOIN outbox.delivery_destinations AS d ON d.destination = v_doc ->> 'destination'
      LEFT JOIN outbox.projection_versions AS pv
             ON pv.projection_name = v_projection_name AND pv.projection_version = v_projection_version;
    IF v_dest_consumer IS NOT NULL AND (v_dest_consumer <> p_consumer_name OR v_dest_kind <> v_kind.receipt_kind) THEN
        RAISE EXCEPTION 'receipt rejected: destination %', v_doc ->> 'destination'
            USING ERRCODE = 'OB002',
                  DETAIL = format('destination %s is registered for consumer %s with receipt kind %s',
                                  v_doc ->> 'destination', v_dest_consumer, v_dest_kind);
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
           OR (v_doc ->> (v_p || 'Ref')) = '' OR pg_catalog.length(v_doc ->> (v_p || 'Ref')) > 500 THEN
            RAISE EXCEPTION 'receipt rejected: %Ref', v_p
                USING ERRCODE = 'OB002', DETAIL = 'a non-empty string of at most 500 characters (the ack rule''s limit)';
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

    -- R-PV-1: the projection version (its state was read with the destination above), checked
    -- after the document so that an invalid receipt is refused as before (OB002/OB201).
    IF p_build_token IS NOT NULL
       OR (v_projection_name <> '' AND v_version_state IS DISTINCT FROM 'active' AND v_version_state IS DISTINCT FROM 'frozen') THEN
        PERFORM inbox._inbox_check_version(v_projection_name, v_projection_version, p_build_token);
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

COMMENT ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text{{ if $bt }}, uuid{{ end }}) IS
    'Insert-or-compare of a content-addressed, closed consumer receipt: new | existing (first receipt''s ref/digest); OB301 same event id with a different envelope digest; OB002 inconsistent or open receipt, or a candidate that is not the receipt''s; OB201 not canonicalizable (hot path: candidate not canonical text); OB802 unregistered projection version, OB001 missing/stale build token of a shadow version. SPEC R-CO-1, R-AK-1a, D-2, R-PV-1, §13.';
REVOKE ALL ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text{{ if $bt }}, uuid{{ end }}) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text{{ if $bt }}, uuid{{ end }}) TO outbox_consumer;
