-- inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_envelope json, p_receipt json)
--   RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text)  (public, SPEC R-CO-1, §13)
-- Purpose: insert-or-compare of a consumer receipt, inside the consumer's transaction (commit it
--   with the domain mutation and the revision progress, R-CO-2).
--   * The database computes the envelope digest itself (outbox.jcs_sha256 of p_event_envelope);
--     a caller's digest is never trusted: the receipt's eventEnvelopeSha256 must equal it.
--   * The receipt document (R-AK-1a) must carry the fields of exactly one registered receipt
--     kind (outbox.receipt_kinds) and agree with the call and the envelope: <prefix>SchemaVersion
--     = the kind's version, <prefix>DigestAlgorithmVersion and eventEnvelopeDigestAlgorithmVersion
--     = 'jcs-sha256-v1', consumerName = p_consumer_name, eventId = the envelope's, a registered
--     destination must map to this consumer and kind, projectionName/projectionVersion = the
--     call's (required for operations_projection, forbidden without projection), eventType and
--     eventSchemaVersion = the envelope's (required for operations_projection), the time field
--     (appliedAt/committedAt/publishedAt) a UTC RFC 3339 time with 6 fractional digits and Z.
--   * <prefix>Ref: optional; when absent the deterministic inbox._inbox_default_ref is assigned.
--     <prefix>Digest: optional; when present it must equal the digest the database computes
--     (jcs-sha256-v1 of the document minus <prefix>Ref, <prefix>Digest and the time field), when
--     absent it is filled in. The stored document is the canonical text of the complete receipt.
--   * Outcomes: 'new' (inserted); 'existing' (a receipt for this consumer/projection/event with
--     the same envelope digest exists: the FIRST receipt's ref and digest are returned and
--     nothing is written). The complete first document is read with inbox.read_receipt.
-- Locking: the primary key (and the (consumer_name, receipt_ref) key) serialise concurrent
--   inserts of the same receipt: INSERT .. ON CONFLICT DO NOTHING waits for the other
--   transaction, then compares against the committed row (READ COMMITTED).
-- SQLSTATEs: OB301 same event id with a different envelope digest (receipt conflict);
--   OB002 receipt document invalid or inconsistent with the call/envelope/registry, or its ref
--   already names another receipt; OB105 envelope lacks a usable eventId/eventType/
--   eventSchemaVersion/aggregateId/aggregateRevision; OB201 a document is not canonicalizable;
--   22023 invalid consumer/projection key.
-- Caller: outbox_consumer (the consumer's login role), SECURITY DEFINER: it has no table grants.
CREATE FUNCTION inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                     p_event_envelope json, p_receipt json)
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
    v_doc                jsonb;
    v_kind               outbox.receipt_kinds;
    v_p                  text;
    v_dest               outbox.delivery_destinations;
    v_time_text          text;
    v_time               timestamptz;
    v_ref                text;
    v_digest             text;
    v_text               text;
    v_inserted           boolean;
    v_existing           inbox.inbox_receipts;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);

    -- The envelope: its digest is computed here (OB201 if not canonicalizable).
    IF p_event_envelope IS NULL OR pg_catalog.json_typeof(p_event_envelope) <> 'object' THEN
        RAISE EXCEPTION 'envelope invalid: not a JSON object' USING ERRCODE = 'OB105';
    END IF;
    v_env_sha := outbox.jcs_sha256(p_event_envelope);
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

    -- The receipt document.
    IF p_receipt IS NULL OR pg_catalog.json_typeof(p_receipt) <> 'object' THEN
        RAISE EXCEPTION 'receipt rejected: not a JSON object' USING ERRCODE = 'OB002';
    END IF;
    PERFORM outbox.jcs_canonicalize(p_receipt); -- OB201 on duplicate keys or unsafe numbers
    v_doc := p_receipt::jsonb;
    v_kind := inbox._inbox_receipt_kind(v_doc);
    v_p := v_kind.field_prefix;

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
    IF v_kind.receipt_kind = 'operations_projection' AND NOT (v_doc ? 'eventType' AND v_doc ? 'eventSchemaVersion') THEN
        RAISE EXCEPTION 'receipt rejected: eventType/eventSchemaVersion'
            USING ERRCODE = 'OB002', DETAIL = 'operations_projection receipts carry the event type and schema version';
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

    -- Ref: the consumer's, or the deterministic default.
    IF v_doc ? (v_p || 'Ref') THEN
        IF pg_catalog.jsonb_typeof(v_doc -> (v_p || 'Ref')) IS DISTINCT FROM 'string'
           OR (v_doc ->> (v_p || 'Ref')) = '' OR pg_catalog.length(v_doc ->> (v_p || 'Ref')) > 200 THEN
            RAISE EXCEPTION 'receipt rejected: %Ref', v_p
                USING ERRCODE = 'OB002', DETAIL = 'a non-empty string of at most 200 characters';
        END IF;
        v_ref := v_doc ->> (v_p || 'Ref');
    ELSE
        v_ref := inbox._inbox_default_ref(p_consumer_name, v_projection_name, v_projection_version, v_event_id);
        v_doc := v_doc || pg_catalog.jsonb_build_object(v_p || 'Ref', v_ref);
    END IF;

    -- Digest: computed here; a given digest must match, a missing one is filled in.
    v_digest := outbox.jcs_sha256((v_doc - (v_p || 'Ref') - (v_p || 'Digest') - v_kind.time_field)::json);
    IF v_doc ? (v_p || 'Digest') THEN
        IF v_doc -> (v_p || 'Digest') IS DISTINCT FROM pg_catalog.to_jsonb(v_digest) THEN
            RAISE EXCEPTION 'receipt rejected: %Digest', v_p
                USING ERRCODE = 'OB002',
                      DETAIL = format('event %s: the receipt digest differs from jcs-sha256-v1 of its candidate (%s)', v_event_id, v_digest);
        END IF;
    ELSE
        v_doc := v_doc || pg_catalog.jsonb_build_object(v_p || 'Digest', v_digest);
    END IF;
    v_text := outbox.jcs_canonicalize(v_doc::json);

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

COMMENT ON FUNCTION inbox.record_receipt(text, text, integer, json, json) IS
    'Insert-or-compare of a content-addressed consumer receipt: new | existing (first receipt''s ref/digest); OB301 same event id with a different envelope digest; OB002 inconsistent receipt. SPEC R-CO-1, §13.';
REVOKE ALL ON FUNCTION inbox.record_receipt(text, text, integer, json, json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_receipt(text, text, integer, json, json) TO outbox_consumer;
