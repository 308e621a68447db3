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

-- inbox._inbox_check_caller(p_consumer_name text) RETURNS void  (private helper, SPEC R-SEC-5)
-- A consumer acts only as itself: the calling role must be a member of the role bound to
-- p_consumer_name in inbox.consumer_roles (inbox.bind_consumer_role). The calling role is the
-- role the session switched to with SET ROLE, else the session user (inside a SECURITY DEFINER
-- function current_user is the owner; the role setting still names the caller's SET ROLE, which
-- PostgreSQL only lets a session set to a role it is a member of). A session whose login is a
-- member of outbox_owner - a superuser is a member of every role - passes first: the owner owns
-- the inbox tables and could write them directly anyway. One membership test on that path, a
-- primary-key probe and one more on the bound path (R-SEC-5, on every inbox call: no role view,
-- no SET clause - this private helper runs inside its callers' pinned search_path and
-- schema-qualifies everything).
-- SQLSTATEs: 42501 insufficient_privilege (name not bound, or bound to a role the caller is not
--   a member of). Locking: none.
-- Caller: inbox.record_receipt, inbox.read_receipt, inbox.observe_revision; granted to nobody.
CREATE FUNCTION inbox._inbox_check_caller(p_consumer_name text)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $fn$
DECLARE
    v_bound  name;
    v_caller name := coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user)::name;
BEGIN
    IF pg_catalog.pg_has_role(session_user, 'outbox_owner', 'MEMBER') THEN
        RETURN;
    END IF;
    SELECT c.role_name INTO v_bound FROM inbox.consumer_roles AS c WHERE c.consumer_name = p_consumer_name;
    IF v_bound IS NOT NULL AND pg_catalog.pg_has_role(v_caller, v_bound, 'MEMBER') THEN
        RETURN;
    END IF;
    IF v_bound IS NULL THEN
        RAISE EXCEPTION 'inbox: consumer % is not bound to a role', p_consumer_name
            USING ERRCODE = '42501',
                  DETAIL = pg_catalog.format('no row in inbox.consumer_roles for consumer_name %L', p_consumer_name),
                  HINT = 'the owner or registrar binds it: SELECT inbox.bind_consumer_role(consumer_name, role)';
    END IF;
    RAISE EXCEPTION 'inbox: role % may not act as consumer %', v_caller, p_consumer_name
        USING ERRCODE = '42501',
              DETAIL = pg_catalog.format('consumer_name %L is bound to role %I; the calling role is not a member of it', p_consumer_name, v_bound);
END
$fn$;

COMMENT ON FUNCTION inbox._inbox_check_caller(text) IS
    'Private: 42501 unless the calling role is a member of the role bound to the consumer name (inbox.consumer_roles, SPEC R-SEC-5).';
REVOKE ALL ON FUNCTION inbox._inbox_check_caller(text) FROM PUBLIC;

-- inbox.bind_consumer_role(p_consumer_name text, p_role_name text) RETURNS void
--   (public, SPEC R-SEC-5)
-- Purpose: bind a consumer name to the database role whose members may act as that consumer in
--   inbox.record_receipt / read_receipt / observe_revision. Insert-or-compare: the same binding
--   again is a no-op; a name bound to another role is refused (a binding never changes: rotate
--   logins by granting the bound role, not by rebinding the name). One row per name in
--   inbox.consumer_roles, append-only (bound_by = session user, bound_at).
-- SQLSTATEs: 22023 consumer name not a literal (D-4), role unknown, or a kernel group role
--   (outbox_*: binding a name to e.g. outbox_consumer would let every consumer act as it);
--   42710 duplicate_object when the name is bound to another role.
-- Caller: outbox_registrar (and outbox_owner).
CREATE FUNCTION inbox.bind_consumer_role(p_consumer_name text, p_role_name text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_bound name;
BEGIN
    IF p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_consumer_name) > 200 THEN
        RAISE EXCEPTION 'bind_consumer_role: invalid consumer name'
            USING ERRCODE = '22023', DETAIL = 'consumer_name must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters (SPEC D-4)';
    END IF;
    IF p_role_name IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role_name) THEN
        RAISE EXCEPTION 'bind_consumer_role: unknown role'
            USING ERRCODE = '22023', DETAIL = pg_catalog.format('role %L does not exist', p_role_name);
    END IF;
    IF p_role_name LIKE 'outbox\_%' OR p_role_name LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'bind_consumer_role: a kernel or built-in role cannot be bound to a consumer'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('role %I is shared by many logins; bind a role of this consumer''s own (granted outbox_consumer)', p_role_name);
    END IF;
    INSERT INTO inbox.consumer_roles (consumer_name, role_name)
    VALUES (p_consumer_name, p_role_name)
    ON CONFLICT (consumer_name) DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT c.role_name INTO v_bound FROM inbox.consumer_roles AS c WHERE c.consumer_name = p_consumer_name;
    IF v_bound <> p_role_name THEN
        RAISE EXCEPTION 'bind_consumer_role: consumer % is bound to another role', p_consumer_name
            USING ERRCODE = '42710', DETAIL = pg_catalog.format('consumer_name %L is bound to role %I', p_consumer_name, v_bound);
    END IF;
END
$fn$;

COMMENT ON FUNCTION inbox.bind_consumer_role(text, text) IS
    'Bind a consumer name to the role whose members may act as it in the inbox functions (insert-or-compare; 22023, 42710). SPEC R-SEC-5. Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION inbox.bind_consumer_role(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.bind_consumer_role(text, text) TO outbox_registrar;

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
-- inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_envelope json, p_receipt json, p_receipt_digest_candidate text DEFAULT NULL,
--   p_build_token uuid DEFAULT NULL) RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text)
-- (public, SPEC R-CO-1, R-AK-1a, D-2, R-PV-1, §13; how it works: docs/contract.md "The inbox")
-- Purpose: insert-or-compare of a content-addressed consumer receipt inside the consumer's
--   transaction: 'new' (inserted) or 'existing' (the first receipt's ref and digest). The envelope
--   digest is the database's own; the receipt must pass the closed-receipt rule shared with the
--   producer (outbox._receipt_problem) and agree with the call, the envelope and the registry.
-- SQLSTATEs: 42501 caller not bound to consumer_name; OB301 same event id, other envelope digest;
--   OB002 receipt invalid, not closed or inconsistent (or a candidate not the receipt's, or a ref
--   naming another receipt); OB105 envelope unusable; OB201 not canonicalizable; 22023 bad key;
--   OB802 projection version unregistered/retired; OB001 missing/stale build token.
-- Caller: outbox_consumer (its login role); SECURITY DEFINER: it has no table grants.
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
    v_dest_consumer      text;
    v_dest_kind          text;
    v_version_state      text;
    p_build_token        uuid;  -- the six-argument rendering: no token
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

    -- The closed-receipt rule (R-AK-1a), the same for the producer and the inbox: members, types,
    -- required members, integer form, schema version, digest algorithms.
    v_problem := outbox._receipt_problem(v_kind, p_receipt, v_doc);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'receipt rejected: not a closed % receipt', v_kind.receipt_kind
            USING ERRCODE = 'OB002', DETAIL = v_problem, HINT = 'SPEC R-AK-1a: receipts are closed documents (outbox._receipt_problem)';
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
    IF v_projection_name <> '' OR v_kind.requires_projection THEN
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

COMMENT ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text) IS
    'Insert-or-compare of a content-addressed, closed consumer receipt: new | existing (first receipt''s ref/digest); OB301 same event id with a different envelope digest; OB002 inconsistent or open receipt, or a candidate that is not the receipt''s; OB201 not canonicalizable (hot path: candidate not canonical text); OB802 unregistered projection version, OB001 missing/stale build token of a shadow version. SPEC R-CO-1, R-AK-1a, D-2, R-PV-1, §13.';
REVOKE ALL ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text) TO outbox_consumer;

DROP FUNCTION inbox.read_receipt(text, text, integer, uuid, text);
-- inbox.read_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_id uuid, p_event_envelope_sha256 text) RETURNS json  (public, SPEC R-CO-1, R-AK-8)
-- Purpose: the consumer's own first receipt for an event, so that a redelivery answers with the
--   SAME receipt document and ack it answered the first time, without applying again. Returns
--   the stored canonical receipt document, or NULL when this consumer/projection has no receipt
--   for the event. Read-only: it writes nothing, so the digest it compares is the caller's
--   (the consumer kit computes it from the bytes it received); inbox.record_receipt, which
--   writes, computes its own.
-- Locking: none (a plain read; READ COMMITTED callers see receipts committed before the call).
-- SQLSTATEs: 42501 the calling role is not bound to consumer_name (inbox.consumer_roles, R-SEC-5);
--   OB301 a receipt for this event id exists with a different envelope digest;
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
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role
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

DROP FUNCTION inbox.observe_revision(text, text, integer, text, bigint);
-- inbox.observe_revision(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_aggregate_id text, p_aggregate_revision bigint, p_build_token uuid DEFAULT NULL)
--   RETURNS text  (public, SPEC R-CO-3, R-PV-1, §13)
-- Purpose: the per-aggregate revision check of an ordered consumer, inside its transaction.
--   'apply'     revision = progress+1 (or 1 with no progress): progress advanced to this
--               revision and every open gap it fills closed (closed_at, closed_by_revision);
--               commit it with the receipt and the domain mutation (R-CO-2), or roll it all back.
--   'duplicate' revision <= progress: nothing written (the consumer answers with its receipt).
--   'gap'       revision > progress+1: the gap row (expected = progress+1, highest seen
--               revision, first/last seen, count) is inserted or updated; progress unchanged,
--               nothing else written. The consumer commits that alone and answers retryable
--               awaiting_revision, writing no receipt (R-CO-3).
-- Projection version (SPEC §11b R-PV-1): as inbox.record_receipt's - a named projection's
--   version must be registered (OB802); active and frozen versions take no token, a shadow
--   version needs its live build's token (missing/stale: OB001), checked before anything is
--   written. One primary-key lookup of outbox.projection_versions; anything but "active/frozen,
--   no token" is decided by inbox._inbox_check_version (which locks a shadow version FOR SHARE).
-- Locking: the progress row FOR UPDATE, created first when the aggregate has none (last_revision
--   0 = nothing applied yet; revision 1 creates it applied). Observations of one aggregate
--   therefore serialise until the observing transaction ends, on a row no other role can lock
--   (R-SEC-5: no advisory key). READ COMMITTED is assumed.
-- SQLSTATEs: 42501 the calling role is not bound to consumer_name (inbox.consumer_roles, R-SEC-5);
--   OB105 empty aggregate id or revision <= 0; 22023 invalid consumer/projection key or a build
--   token without a projection; OB802 projection version not registered or retired; OB001 a
--   shadow version without its live build token, or a token for an active/frozen version.
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
    v_version_state      text;
    p_build_token        uuid;  -- the five-argument rendering: no token
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role
    -- R-PV-1: the version's state in one primary-key lookup; the rare cases go to the helper.
    IF v_projection_name <> '' THEN
        SELECT pv.state INTO v_version_state
          FROM outbox.projection_versions AS pv
         WHERE pv.projection_name = v_projection_name AND pv.projection_version = v_projection_version;
    END IF;
    IF p_build_token IS NOT NULL
       OR (v_projection_name <> '' AND v_version_state IS DISTINCT FROM 'active' AND v_version_state IS DISTINCT FROM 'frozen') THEN
        PERFORM inbox._inbox_check_version(v_projection_name, v_projection_version, p_build_token);
    END IF;
    IF p_aggregate_id IS NULL OR p_aggregate_id = '' OR p_aggregate_revision IS NULL OR p_aggregate_revision <= 0 THEN
        RAISE EXCEPTION 'envelope invalid: aggregate id and revision'
            USING ERRCODE = 'OB105', DETAIL = 'aggregateId must be non-empty and aggregateRevision > 0';
    END IF;

    -- Serialise observations of one aggregate on its progress row (R-SEC-5: a row lock, never an
    -- advisory key another role could take). The first observation of an aggregate creates the
    -- row: revision 1 creates it applied (last_revision 1, done); any other revision creates it
    -- with last_revision 0 ("nothing applied yet") and locks it. A concurrent first observation
    -- waits on the primary key until this transaction ends, then finds the row.
    IF p_aggregate_revision = 1 THEN
        INSERT INTO inbox.inbox_revision_progress
               (consumer_name, projection_name, projection_version, aggregate_id, last_revision)
        VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, 1)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            UPDATE inbox.inbox_revision_gaps g
               SET closed_at = pg_catalog.now(), closed_by_revision = 1
             WHERE g.consumer_name = p_consumer_name AND g.projection_name = v_projection_name
               AND g.projection_version = v_projection_version AND g.aggregate_id = p_aggregate_id
               AND g.closed_at IS NULL AND g.expected_revision <= 1;
            RETURN 'apply';
        END IF;
    ELSE
        INSERT INTO inbox.inbox_revision_progress
               (consumer_name, projection_name, projection_version, aggregate_id, last_revision)
        VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, 0)
        ON CONFLICT DO NOTHING;
    END IF;
    -- A new statement: sees the row committed by a transaction we waited for.
    SELECT p.last_revision INTO STRICT v_last
      FROM inbox.inbox_revision_progress p
     WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
       AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id
       FOR UPDATE;

    IF p_aggregate_revision <= v_last THEN
        RETURN 'duplicate';
    END IF;

    IF p_aggregate_revision = v_last + 1 THEN
        UPDATE inbox.inbox_revision_progress p
           SET last_revision = p_aggregate_revision, updated_at = pg_catalog.now()
         WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
           AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id;
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
    'Per-aggregate revision check of an ordered consumer: apply (progress advanced, gaps closed) | duplicate | gap (gap recorded, nothing else); OB802 unregistered projection version, OB001 missing/stale build token of a shadow version. SPEC R-CO-3, R-PV-1, §13.';
REVOKE ALL ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint) TO outbox_consumer;


-- No advisory keys (R-SEC-5).
DROP FUNCTION outbox.activate_delivery_set(integer, integer, text, text);
-- outbox.activate_delivery_set(delivery_set_version, definition_schema_version,
--                              digest_algorithm_version, definition_digest)
-- Purpose: make the registered definition named by its full quartet the one active version of
--   this database (R-DS-5); the previously active version becomes 'retired' (it may be selected
--   again later: activation only ever selects a registered definition, never defines one).
--   Events appended afterwards freeze the new quartet; history is never reinterpreted (R-DS-6).
-- Locking: SHARE ROW EXCLUSIVE on outbox.delivery_set_versions (self-conflicting: activations
--   and registrations serialize; readers such as append_event are not blocked) - a lock no role
--   outside the kernel can take, unlike an advisory key (R-SEC-5); the unique partial index
--   delivery_set_versions_one_active guarantees one active row.
-- Projection versions (R-PV-2): a definition whose members would retarget a projection that
--   has registered versions (highest target not the active version, or a target neither active
--   nor frozen: outbox._delivery_set_retarget_problem) is refused with OB808. The pointer moves
--   only through outbox.cutover_projection, which switches the version first and then calls this
--   function, so the check passes there (no session setting is trusted for it).
-- Raises: OB101 when no registered definition has exactly that quartet; OB808 as above.
-- Caller: outbox_registrar; outbox.cutover_projection (as outbox_owner).
CREATE FUNCTION outbox.activate_delivery_set(
    p_delivery_set_version integer,
    p_definition_schema_version integer,
    p_digest_algorithm_version text,
    p_definition_digest text
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_status  text;
    v_problem text;
BEGIN
    LOCK TABLE outbox.delivery_set_versions IN SHARE ROW EXCLUSIVE MODE;
    SELECT status INTO v_status
    FROM outbox.delivery_set_versions
    WHERE delivery_set_version = p_delivery_set_version
      AND definition_schema_version = p_definition_schema_version
      AND digest_algorithm_version = p_digest_algorithm_version
      AND definition_digest = p_definition_digest
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no registered delivery-set definition has this quartet'
            USING ERRCODE = 'OB101',
                  DETAIL = format('(%s, %s, %s, %s)', p_delivery_set_version, p_definition_schema_version,
                                  p_digest_algorithm_version, p_definition_digest),
                  HINT = 'register the definition with outbox.register_delivery_set first';
    END IF;
    IF v_status = 'active' THEN
        RETURN;
    END IF;
    UPDATE outbox.delivery_set_versions SET status = 'retired' WHERE status = 'active';
    UPDATE outbox.delivery_set_versions SET status = 'active', activated_at = now()
    WHERE delivery_set_version = p_delivery_set_version;
END
$fn$;

COMMENT ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) IS
    'Make one registered delivery-set quartet the active version (SPEC R-DS-5). Raises OB101; OB808 when it would retarget a versioned projection outside cutover_projection (R-PV-2). Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) TO outbox_registrar;

DROP FUNCTION outbox.register_delivery_set(json, text);
-- outbox.register_delivery_set(definition json, source_release text)
-- Purpose: validate a complete DeliverySetDefinition@1 document (SPEC §3.1, R-DS-1..3) and
--   insert-or-compare it on the full quartet (R-DS-4). The identical document registered again is
--   a no-op returning the same quartet. The definition is stored as canonical JSON text, its
--   members and applicable events as rows; nothing becomes active here (R-DS-5).
-- Checks: exact key sets (no unknown, no missing field), schema 1, algorithm jcs-sha256-v1,
--   literals, integer counts equal to array lengths, arrays strictly sorted bytewise (so no
--   duplicates), every member's event key applicable, one consumer per (event, destination),
--   destination -> consumer, receipt type/schema and projection branch as registered in
--   outbox.delivery_destinations, digest = jcs-sha256-v1(document minus its digest).
-- Locking: SHARE ROW EXCLUSIVE on outbox.delivery_set_versions serializes registrations and
--   activations (a table lock only the kernel's owner can take: R-SEC-5, no advisory key).
-- Raises: OB101 invalid definition (any rule above), OB102 same version already registered
--   with a different candidate/digest.
-- Caller: outbox_registrar.
CREATE FUNCTION outbox.register_delivery_set(p_definition json, p_source_release text)
RETURNS TABLE (delivery_set_version integer, definition_schema_version integer,
               digest_algorithm_version text, definition_digest text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    c_literal constant text := '^[a-z0-9][a-z0-9._@-]*$';
    v_doc       jsonb;
    v_canonical text;
    v_version   bigint;
    v_schema    bigint;
    v_algo      text;
    v_digest    text;
    v_computed  text;
    v_count     bigint;
    v_elem      jsonb;
    v_prev      text[];
    v_key       text[];
    v_proj      jsonb;
    v_dest      outbox.delivery_destinations%ROWTYPE;
    v_i         integer := 0;
    v_existing  outbox.delivery_set_versions%ROWTYPE;
BEGIN
    IF p_definition IS NULL THEN
        PERFORM outbox._registry_fail('definition is NULL');
    END IF;
    IF p_source_release IS NULL OR length(p_source_release) NOT BETWEEN 1 AND 200 THEN
        PERFORM outbox._registry_fail('source_release must be 1..200 characters');
    END IF;
    BEGIN
        v_canonical := outbox.jcs_canonicalize(p_definition);
    EXCEPTION WHEN SQLSTATE 'OB201' THEN
        PERFORM outbox._registry_fail('not canonicalizable: ' || SQLERRM);
    END;
    v_doc := v_canonical::jsonb;

    IF jsonb_typeof(v_doc) <> 'object' THEN
        PERFORM outbox._registry_fail('definition must be a JSON object');
    END IF;
    IF (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(v_doc) k) IS DISTINCT FROM
       ARRAY['applicableEventCount', 'applicableEvents', 'deliverySetDefinitionDigest',
             'deliverySetDefinitionDigestAlgorithmVersion', 'deliverySetDefinitionSchemaVersion',
             'deliverySetVersion', 'memberCount', 'members'] COLLATE "C" THEN
        PERFORM outbox._registry_fail(format('top-level keys must be exactly the DeliverySetDefinition@1 fields, got %s',
            (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(v_doc) k)));
    END IF;

    v_version := outbox._json_int(v_doc -> 'deliverySetVersion');
    IF v_version IS NULL OR v_version < 1 OR v_version > 2147483647 THEN
        PERFORM outbox._registry_fail('deliverySetVersion must be a positive integer');
    END IF;
    v_schema := outbox._json_int(v_doc -> 'deliverySetDefinitionSchemaVersion');
    IF v_schema IS DISTINCT FROM 1 THEN
        PERFORM outbox._registry_fail('unknown deliverySetDefinitionSchemaVersion (only 1 is known)');
    END IF;
    IF (v_doc -> 'deliverySetDefinitionDigestAlgorithmVersion') IS DISTINCT FROM '"jcs-sha256-v1"'::jsonb THEN
        PERFORM outbox._registry_fail('unknown deliverySetDefinitionDigestAlgorithmVersion (only jcs-sha256-v1 is known)');
    END IF;
    v_algo := 'jcs-sha256-v1';
    IF jsonb_typeof(v_doc -> 'deliverySetDefinitionDigest') IS DISTINCT FROM 'string'
       OR (v_doc ->> 'deliverySetDefinitionDigest') !~ '^[0-9a-f]{64}$' THEN
        PERFORM outbox._registry_fail('deliverySetDefinitionDigest must be 64 lower-case hex digits');
    END IF;
    v_digest := v_doc ->> 'deliverySetDefinitionDigest';

    -- applicableEvents (R-DS-1)
    IF jsonb_typeof(v_doc -> 'applicableEvents') IS DISTINCT FROM 'array' THEN
        PERFORM outbox._registry_fail('applicableEvents must be an array');
    END IF;
    v_count := outbox._json_int(v_doc -> 'applicableEventCount');
    IF v_count IS DISTINCT FROM jsonb_array_length(v_doc -> 'applicableEvents')::bigint THEN
        PERFORM outbox._registry_fail(format('applicableEventCount %s does not equal the %s applicable events',
            v_doc -> 'applicableEventCount', jsonb_array_length(v_doc -> 'applicableEvents')));
    END IF;
    IF v_count = 0 THEN
        PERFORM outbox._registry_fail('applicableEvents must not be empty');
    END IF;
    v_prev := NULL;
    v_i := 0;
    FOR v_elem IN SELECT e FROM jsonb_array_elements(v_doc -> 'applicableEvents') e LOOP
        IF jsonb_typeof(v_elem) <> 'object'
           OR (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(v_elem) k)
              IS DISTINCT FROM ARRAY['eventSchemaVersion', 'eventType'] COLLATE "C" THEN
            PERFORM outbox._registry_fail(format('applicableEvents[%s] must have exactly eventType and eventSchemaVersion', v_i));
        END IF;
        IF jsonb_typeof(v_elem -> 'eventType') <> 'string' OR jsonb_typeof(v_elem -> 'eventSchemaVersion') <> 'string'
           OR (v_elem ->> 'eventType') !~ c_literal OR (v_elem ->> 'eventSchemaVersion') !~ c_literal THEN
            PERFORM outbox._registry_fail(format('applicableEvents[%s]: eventType and eventSchemaVersion must be literals matching %s', v_i, c_literal));
        END IF;
        v_key := ARRAY[v_elem ->> 'eventType', v_elem ->> 'eventSchemaVersion'];
        IF v_prev IS NOT NULL AND NOT (v_key COLLATE "C" > v_prev COLLATE "C") THEN
            PERFORM outbox._registry_fail(format('applicableEvents not strictly sorted by (eventType, eventSchemaVersion) at [%s] (%s after %s)',
                v_i, array_to_string(v_key, '@'), array_to_string(v_prev, '@')));
        END IF;
        v_prev := v_key;
        v_i := v_i + 1;
    END LOOP;

    -- members (R-DS-1, R-DS-2)
    IF jsonb_typeof(v_doc -> 'members') IS DISTINCT FROM 'array' THEN
        PERFORM outbox._registry_fail('members must be an array');
    END IF;
    v_count := outbox._json_int(v_doc -> 'memberCount');
    IF v_count IS DISTINCT FROM jsonb_array_length(v_doc -> 'members')::bigint THEN
        PERFORM outbox._registry_fail(format('memberCount %s does not equal the %s members',
            v_doc -> 'memberCount', jsonb_array_length(v_doc -> 'members')));
    END IF;
    v_prev := NULL;
    v_i := 0;
    FOR v_elem IN SELECT e FROM jsonb_array_elements(v_doc -> 'members') e LOOP
        IF jsonb_typeof(v_elem) <> 'object'
           OR (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(v_elem) k)
              IS DISTINCT FROM ARRAY['consumerName', 'destination', 'eventSchemaVersion', 'eventType',
                                     'expectedReceiptSchemaVersion', 'expectedReceiptType', 'mandatory',
                                     'projectionTarget'] COLLATE "C" THEN
            PERFORM outbox._registry_fail(format('members[%s] must have exactly the member fields of DeliverySetDefinition@1', v_i));
        END IF;
        IF jsonb_typeof(v_elem -> 'eventType') <> 'string' OR jsonb_typeof(v_elem -> 'eventSchemaVersion') <> 'string'
           OR jsonb_typeof(v_elem -> 'destination') <> 'string' OR jsonb_typeof(v_elem -> 'consumerName') <> 'string'
           OR (v_elem ->> 'eventType') !~ c_literal OR (v_elem ->> 'eventSchemaVersion') !~ c_literal
           OR (v_elem ->> 'destination') !~ c_literal OR (v_elem ->> 'consumerName') !~ c_literal THEN
            PERFORM outbox._registry_fail(format('members[%s]: eventType, eventSchemaVersion, destination, consumerName must be literals matching %s', v_i, c_literal));
        END IF;
        IF jsonb_typeof(v_elem -> 'expectedReceiptType') <> 'string'
           OR outbox._json_int(v_elem -> 'expectedReceiptSchemaVersion') IS NULL
           OR jsonb_typeof(v_elem -> 'mandatory') <> 'boolean' THEN
            PERFORM outbox._registry_fail(format('members[%s]: expectedReceiptType string, expectedReceiptSchemaVersion integer, mandatory boolean', v_i));
        END IF;
        v_key := ARRAY[v_elem ->> 'eventType', v_elem ->> 'eventSchemaVersion', v_elem ->> 'destination', v_elem ->> 'consumerName'];
        IF v_prev IS NOT NULL AND NOT (v_key COLLATE "C" > v_prev COLLATE "C") THEN
            PERFORM outbox._registry_fail(format('members not strictly sorted by (eventType, eventSchemaVersion, destination, consumerName) at [%s]', v_i));
        END IF;
        IF v_prev IS NOT NULL AND v_key[1:3] = v_prev[1:3] THEN
            PERFORM outbox._registry_fail(format('members[%s]: (%s, %s, %s) maps to more than one consumer', v_i, v_key[1], v_key[2], v_key[3]));
        END IF;
        v_prev := v_key;
        IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_doc -> 'applicableEvents') a
                       WHERE a ->> 'eventType' = v_key[1] AND a ->> 'eventSchemaVersion' = v_key[2]) THEN
            PERFORM outbox._registry_fail(format('members[%s]: orphan member, (%s, %s) is not in applicableEvents', v_i, v_key[1], v_key[2]));
        END IF;

        SELECT * INTO v_dest FROM outbox.delivery_destinations d WHERE d.destination = v_key[3];
        IF NOT FOUND THEN
            PERFORM outbox._registry_fail(format('members[%s]: destination %s is not registered', v_i, v_key[3]));
        END IF;
        IF v_dest.consumer_name <> v_key[4] THEN
            PERFORM outbox._registry_fail(format('members[%s]: destination %s is bound to consumer %s, not %s (rebinding)',
                v_i, v_key[3], v_dest.consumer_name, v_key[4]));
        END IF;
        IF v_dest.receipt_type <> (v_elem ->> 'expectedReceiptType')
           OR v_dest.receipt_schema_version::bigint <> outbox._json_int(v_elem -> 'expectedReceiptSchemaVersion') THEN
            PERFORM outbox._registry_fail(format('members[%s]: destination %s expects receipt %s@%s, member says %s@%s',
                v_i, v_key[3], v_dest.receipt_type, v_dest.receipt_schema_version,
                v_elem ->> 'expectedReceiptType', v_elem -> 'expectedReceiptSchemaVersion'));
        END IF;
        v_proj := v_elem -> 'projectionTarget';
        IF jsonb_typeof(v_proj) IS DISTINCT FROM 'object' THEN
            PERFORM outbox._registry_fail(format('members[%s]: projectionTarget must be an object', v_i));
        END IF;
        IF v_proj = '{"state":"not_applicable"}'::jsonb THEN
            IF v_dest.projection_required THEN
                PERFORM outbox._registry_fail(format('members[%s]: destination %s requires a projection target (state=required)', v_i, v_key[3]));
            END IF;
        ELSIF (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(v_proj) k)
                  = ARRAY['projectionName', 'projectionVersion', 'state'] COLLATE "C"
              AND v_proj ->> 'state' = 'required'
              AND jsonb_typeof(v_proj -> 'projectionName') = 'string'
              AND (v_proj ->> 'projectionName') ~ c_literal
              AND outbox._json_int(v_proj -> 'projectionVersion') BETWEEN 1 AND 2147483647 THEN
            IF NOT v_dest.projection_required THEN
                PERFORM outbox._registry_fail(format('members[%s]: destination %s takes no projection target (state=not_applicable)', v_i, v_key[3]));
            END IF;
        ELSE
            PERFORM outbox._registry_fail(format('members[%s]: projectionTarget must be {state:not_applicable} or {state:required, projectionName, projectionVersion}', v_i));
        END IF;
        v_i := v_i + 1;
    END LOOP;

    -- digest (R-DS-3): candidate = document minus its digest
    v_computed := outbox.jcs_sha256((v_doc - 'deliverySetDefinitionDigest')::json);
    IF v_computed <> v_digest THEN
        PERFORM outbox._registry_fail(format('deliverySetDefinitionDigest %s does not match the candidate digest %s', v_digest, v_computed));
    END IF;

    -- insert-or-compare on the quartet (R-DS-4)
    LOCK TABLE outbox.delivery_set_versions IN SHARE ROW EXCLUSIVE MODE;
    SELECT * INTO v_existing FROM outbox.delivery_set_versions v WHERE v.delivery_set_version = v_version;
    IF FOUND THEN
        IF v_existing.definition_digest <> v_digest OR v_existing.definition_schema_version <> v_schema
           OR v_existing.digest_algorithm_version <> v_algo THEN
            RAISE EXCEPTION 'delivery-set version conflict'
                USING ERRCODE = 'OB102',
                      DETAIL = format('version %s is registered with digest %s; this document has digest %s',
                                      v_version, v_existing.definition_digest, v_digest);
        END IF;
        RETURN QUERY SELECT v_existing.delivery_set_version, v_existing.definition_schema_version,
                            v_existing.digest_algorithm_version, v_existing.definition_digest;
        RETURN;
    END IF;

    INSERT INTO outbox.delivery_set_versions
        (delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest,
         definition, status, source_release)
    VALUES (v_version, v_schema, v_algo, v_digest, v_canonical, 'registered', p_source_release);

    INSERT INTO outbox.delivery_set_applicable_events
        (delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest,
         event_type, event_schema_version)
    SELECT v_version, v_schema, v_algo, v_digest, a ->> 'eventType', a ->> 'eventSchemaVersion'
    FROM jsonb_array_elements(v_doc -> 'applicableEvents') a;

    INSERT INTO outbox.delivery_set_members
        (delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest,
         event_type, event_schema_version, destination, consumer_name, expected_receipt_type,
         expected_receipt_schema_version, projection_state, projection_name, projection_version, mandatory)
    SELECT v_version, v_schema, v_algo, v_digest, m ->> 'eventType', m ->> 'eventSchemaVersion',
           m ->> 'destination', m ->> 'consumerName', m ->> 'expectedReceiptType',
           (m ->> 'expectedReceiptSchemaVersion')::numeric::integer, m -> 'projectionTarget' ->> 'state',
           m -> 'projectionTarget' ->> 'projectionName',
           (m -> 'projectionTarget' ->> 'projectionVersion')::numeric::integer, (m ->> 'mandatory')::boolean
    FROM jsonb_array_elements(v_doc -> 'members') m;

    RETURN QUERY SELECT v_version::integer, v_schema::integer, v_algo, v_digest;
END
$fn$;

COMMENT ON FUNCTION outbox.register_delivery_set(json, text) IS
    'Validate and insert-or-compare a DeliverySetDefinition@1 (SPEC R-DS-1..4). Raises OB101, OB102. Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.register_delivery_set(json, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_delivery_set(json, text) TO outbox_registrar;


-- Linear, bounded canonicalization (R-SEC-5).
DROP FUNCTION outbox._jcs_sort_key(text);
-- outbox._jcs_sort_key(p_name text) RETURNS bytea  (private helper, SPEC D-2, R-SEC-5)
-- A byte string whose bytewise order equals the UTF-16 code-unit order of member names
-- (RFC 8785 §3.2.3): the UTF-8 bytes of the name with the lead bytes 0xEE and 0xEF (U+E000..U+FFFF)
-- rewritten to 0xF8 and 0xF9, so that those characters sort after every supplementary character
-- (lead bytes 0xF0..0xF4), as their UTF-16 code units sort after the surrogates D800..DFFF.
-- 0xEE/0xEF only ever occur as lead bytes in valid UTF-8, and 0xF8/0xF9 never occur at all.
-- Linear in the name's length (R-SEC-5): the bytes as hex, each byte followed by a comma (so a
-- match of 'ee,' is always one whole byte), two replace() calls, back to bytes - no per-byte
-- loop (set_byte copied the whole value once per rewritten byte: quadratic).
-- Only called for names that contain a character in U+E000..U+FFFF; other names sort by their
-- plain UTF-8 bytes. Raises nothing. Caller: outbox._jcs_value only; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._jcs_sort_key(p_name text)
RETURNS bytea
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT pg_catalog.decode(
               pg_catalog.replace(
                   pg_catalog.replace(
                       pg_catalog.replace(
                           pg_catalog.regexp_replace(pg_catalog.encode(pg_catalog.convert_to(p_name, 'UTF8'), 'hex'),
                                                     '(..)', '\1,', 'g'),
                           'ee,', 'f8,'),
                       'ef,', 'f9,'),
                   ',', ''),
               'hex')
$fn$;

COMMENT ON FUNCTION outbox._jcs_sort_key(text) IS
    'Private: UTF-16 code-unit order sort key of a JSON member name (RFC 8785 §3.2.3, SPEC D-2); linear in the name (R-SEC-5).';
REVOKE ALL ON FUNCTION outbox._jcs_sort_key(text) FROM PUBLIC;

DROP FUNCTION outbox._jcs_value(json, integer);
-- outbox._jcs_value(p_value json, p_depth integer) RETURNS text  (private helper, SPEC D-2)
-- RFC 8785 (JCS) canonical text of one JSON value under the jcs-sha256-v1 subset. Recursive over
-- objects and arrays only; scalars of a container are rendered inline in one aggregate query:
--   strings  to_json(text) escaping (exactly the JCS escapes),
--   numbers  integers with |n| <= 2^53-1 in shortest decimal form (outbox._jcs_number),
--   members  sorted by the UTF-16 code units of their names (outbox._jcs_sort_key trick),
--   literals true / false / null as they are.
-- p_depth is the nesting level of p_value when it is a container (the document's top level is 1).
-- Raises OB201 for duplicate member names, non-integer or unsafe numbers, and containers nested
-- deeper than 64 levels. PostgreSQL itself raises 22P05 (\u0000) and 22P02 (lone surrogate) while
-- de-escaping; outbox.jcs_canonicalize turns those into OB201.
-- Caller: outbox.jcs_canonicalize (and itself); granted to nobody.
CREATE FUNCTION outbox._jcs_value(p_value json, p_depth integer)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_type     text := pg_catalog.json_typeof(p_value);
    v_text     text;
    v_count    bigint;
    v_distinct bigint;
    v_dup      text;
    v_longest  integer;
BEGIN
    IF v_type = 'object' OR v_type = 'array' THEN
        IF p_depth > 64 THEN
            RAISE EXCEPTION 'jcs: document nested deeper than 64 levels'
                USING ERRCODE = 'OB201', DETAIL = 'jcs-sha256-v1 documents may nest at most 64 objects/arrays';
        END IF;
    END IF;

    IF v_type = 'object' THEN
        SELECT pg_catalog.count(*),
               pg_catalog.count(DISTINCT e.key COLLATE "C"),
               pg_catalog.max(pg_catalog.length(e.key)),
               pg_catalog.string_agg(
                   pg_catalog.to_json(e.key)::text || ':' ||
                   CASE pg_catalog.json_typeof(e.value)
                       WHEN 'string' THEN pg_catalog.to_json(pg_catalog.json_extract_path_text(e.value, VARIADIC '{}'::text[]))::text
                       WHEN 'number' THEN
                           CASE WHEN e.value::text ~ '^-?[1-9][0-9]{0,14}$' OR e.value::text = '0'
                                THEN e.value::text
                                ELSE outbox._jcs_number(e.value::text) END
                       WHEN 'object' THEN outbox._jcs_value(e.value, p_depth + 1)
                       WHEN 'array' THEN outbox._jcs_value(e.value, p_depth + 1)
                       ELSE e.value::text
                   END,
                   ','
                   ORDER BY CASE WHEN e.key ~ '[\uE000-\uFFFF]'
                                 THEN outbox._jcs_sort_key(e.key)
                                 ELSE pg_catalog.convert_to(e.key, 'UTF8') END)
          INTO v_count, v_distinct, v_longest, v_text
          FROM pg_catalog.json_each(p_value) AS e;
        IF v_longest > 1024 THEN
            RAISE EXCEPTION 'jcs: member name longer than 1024 characters'
                USING ERRCODE = 'OB201', DETAIL = pg_catalog.format('a member name has %s characters; jcs-sha256-v1 documents allow at most 1024 (R-SEC-5)', v_longest);
        END IF;
        IF v_count <> v_distinct THEN
            SELECT d.k INTO v_dup
              FROM (SELECT e.key COLLATE "C" AS k FROM pg_catalog.json_each(p_value) AS e) AS d
             GROUP BY d.k
            HAVING pg_catalog.count(*) > 1
             LIMIT 1;
            RAISE EXCEPTION 'jcs: duplicate member name %', pg_catalog.to_json(v_dup)::text
                USING ERRCODE = 'OB201', DETAIL = 'RFC 8785 documents must not repeat a member name within one object';
        END IF;
        RETURN '{' || COALESCE(v_text, '') || '}';

    ELSIF v_type = 'array' THEN
        SELECT pg_catalog.string_agg(
                   CASE pg_catalog.json_typeof(e.value)
                       WHEN 'string' THEN pg_catalog.to_json(pg_catalog.json_extract_path_text(e.value, VARIADIC '{}'::text[]))::text
                       WHEN 'number' THEN
                           CASE WHEN e.value::text ~ '^-?[1-9][0-9]{0,14}$' OR e.value::text = '0'
                                THEN e.value::text
                                ELSE outbox._jcs_number(e.value::text) END
                       WHEN 'object' THEN outbox._jcs_value(e.value, p_depth + 1)
                       WHEN 'array' THEN outbox._jcs_value(e.value, p_depth + 1)
                       ELSE e.value::text
                   END,
                   ','
                   ORDER BY e.ordinality)
          INTO v_text
          FROM pg_catalog.json_array_elements(p_value) WITH ORDINALITY AS e(value, ordinality);
        RETURN '[' || COALESCE(v_text, '') || ']';

    ELSIF v_type = 'string' THEN
        RETURN pg_catalog.to_json(pg_catalog.json_extract_path_text(p_value, VARIADIC '{}'::text[]))::text;
    ELSIF v_type = 'number' THEN
        RETURN outbox._jcs_number(p_value::text);
    ELSIF v_type = 'boolean' THEN
        RETURN CASE WHEN pg_catalog.btrim(p_value::text, E' \t\n\r') = 'true' THEN 'true' ELSE 'false' END;
    ELSE
        RETURN 'null';
    END IF;
END
$fn$;

COMMENT ON FUNCTION outbox._jcs_value(json, integer) IS
    'Private: RFC 8785 canonical text of one JSON value (jcs-sha256-v1 subset, SPEC D-2); OB201 when not canonicalizable.';
REVOKE ALL ON FUNCTION outbox._jcs_value(json, integer) FROM PUBLIC;

DROP FUNCTION outbox.jcs_sha256(json);
DROP FUNCTION outbox.jcs_canonicalize(json);
-- outbox.jcs_canonicalize(p_doc json) RETURNS text  (public, SPEC D-2)
-- Purpose: the RFC 8785 (JCS) canonical text of a JSON document, restricted to the
--   jcs-sha256-v1 subset: numbers are integers with |n| <= 2^53-1 (56.0, 1E2, -0 are accepted and
--   written 56, 100, 0), member names are unique, no string holds U+0000, at most 64 nested
--   objects/arrays. The parameter is json, not jsonb, so that duplicate names can be detected.
--   Byte-identical to internal/canon (Go) by the golden vectors of T-6. NULL in, NULL out.
-- Locking: none; IMMUTABLE, PARALLEL UNSAFE (the EXCEPTION block of jcs_canonicalize starts a
--   subtransaction, which no process may do during a parallel query; TestJCSInParallelQuery).
-- SQLSTATEs: OB201 document not canonicalizable (duplicate name, non-integer or unsafe number,
--   \u0000, lone surrogate escape, nesting deeper than 64, a member name longer than 1024
--   characters, a document larger than kernel_settings max_payload_bytes: R-SEC-5). Text that is not JSON at all fails
--   with 22P02 in the json cast before this function runs.
-- Security: SECURITY DEFINER (owned by outbox_owner) only so that the caller can run the private,
--   ungranted helpers outbox._jcs_*; it touches no table.
-- Callers: every kernel role (outbox_owner, registrar, producer, dispatcher, consumer, auditor).
CREATE FUNCTION outbox.jcs_canonicalize(p_doc json)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_max bigint;
BEGIN
    -- R-SEC-5: bounded input, like append_event (kernel_settings max_payload_bytes, 1 MiB default)
    SELECT k.value INTO v_max FROM outbox.kernel_settings AS k WHERE k.name = 'max_payload_bytes';
    IF pg_catalog.octet_length(p_doc::text) > coalesce(v_max, 1048576) THEN
        RAISE EXCEPTION 'jcs: document larger than max_payload_bytes'
            USING ERRCODE = 'OB201',
                  DETAIL = pg_catalog.format('%s bytes; jcs-sha256-v1 documents are at most %s bytes (outbox.kernel_settings max_payload_bytes)',
                                             pg_catalog.octet_length(p_doc::text), coalesce(v_max, 1048576));
    END IF;
    RETURN outbox._jcs_value(p_doc, 1);
EXCEPTION
    WHEN untranslatable_character OR invalid_text_representation OR character_not_in_repertoire THEN
        -- raised by PostgreSQL while de-escaping strings: \u0000 (22P05), lone surrogates (22P02)
        RAISE EXCEPTION 'jcs: document not canonicalizable: %', SQLERRM
            USING ERRCODE = 'OB201', DETAIL = 'strings must not hold \u0000 or unpaired surrogate escapes';
END
$fn$;

COMMENT ON FUNCTION outbox.jcs_canonicalize(json) IS
    'RFC 8785 (JCS) canonical text of a JSON document, jcs-sha256-v1 subset (integers |n| <= 2^53-1, unique names, no \u0000, depth <= 64); OB201 otherwise. SPEC D-2.';
REVOKE ALL ON FUNCTION outbox.jcs_canonicalize(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.jcs_canonicalize(json)
    TO outbox_owner, outbox_registrar, outbox_producer, outbox_dispatcher, outbox_consumer, outbox_auditor;

-- outbox.jcs_sha256(p_doc json) RETURNS text  (public, SPEC D-2)
-- Purpose: the jcs-sha256-v1 digest of a JSON document: 64 lower-case hex digits of the SHA-256
--   of the UTF-8 bytes of outbox.jcs_canonicalize(p_doc). Equal to canon.SHA256Hex in Go.
--   NULL in, NULL out.
-- Locking: none; IMMUTABLE, PARALLEL UNSAFE (the EXCEPTION block of jcs_canonicalize starts a
--   subtransaction, which no process may do during a parallel query; TestJCSInParallelQuery).
-- SQLSTATEs: OB201 document not canonicalizable (see outbox.jcs_canonicalize); 22P02 from the
--   json cast when the text is not JSON.
-- Security: SECURITY DEFINER (owned by outbox_owner) only to reach the ungranted private helpers;
--   it touches no table.
-- Callers: every kernel role (outbox_owner, registrar, producer, dispatcher, consumer, auditor).
CREATE FUNCTION outbox.jcs_sha256(p_doc json)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN outbox._sha256_hex(outbox.jcs_canonicalize(p_doc));
END
$fn$;

COMMENT ON FUNCTION outbox.jcs_sha256(json) IS
    'jcs-sha256-v1 digest: lower-case hex SHA-256 of the UTF-8 bytes of outbox.jcs_canonicalize(doc); OB201 when not canonicalizable. SPEC D-2.';
REVOKE ALL ON FUNCTION outbox.jcs_sha256(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.jcs_sha256(json)
    TO outbox_owner, outbox_registrar, outbox_producer, outbox_dispatcher, outbox_consumer, outbox_auditor;

-- outbox._jcs_text_problem(p_text text) RETURNS text  (private, SPEC D-2 "the hot path accepts
--   exactly what the slow path accepts")
-- Purpose: decide whether a caller-supplied canonical text is exactly the RFC 8785 (JCS) form of
--   a document the slow path (outbox.jcs_canonicalize) accepts. Returns NULL when it is, else a
--   short problem description (never document content). Never raises. Cheap whole-text checks
--   (one regular expression, jsonpath over a rewritten copy); the full canonicalizer decides
--   only what they cannot.
-- Attributes: IMMUTABLE, PARALLEL UNSAFE (its EXCEPTION block starts a subtransaction).
-- Design notes (the four steps and why they are sound): docs/contract.md#outbox_jcs_text_problem
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

    -- R-SEC-5: member names are bounded (1024 characters, outbox._jcs_value). Cheap gates first:
    -- a longer name needs a text of more than 1026 bytes, and (unless the text holds an escaped
    -- quote) a piece between two quotes of more than 1024 characters (string_to_array: no
    -- regular expression; a counted repetition over the whole text cost ~160 us). Only then is
    -- every member name measured - a match may also be structure before a string that starts
    -- with a colon - and a long one sends the text to the full canonicalizer, which decides.
    IF pg_catalog.octet_length(p_text) > 1026
       AND (pg_catalog.strpos(p_text, '\"') > 0
            OR (SELECT pg_catalog.max(pg_catalog.length(e.piece))
                  FROM pg_catalog.unnest(pg_catalog.string_to_array(p_text, '"')) AS e(piece)) > 1024)
       AND EXISTS (SELECT 1
                     FROM pg_catalog.regexp_matches(p_text, '"((?:[^"\\]|\\.)*)":', 'g') AS m(g)
                    WHERE pg_catalog.length(pg_catalog.regexp_replace(m.g[1], '\\(u....|.)', 'x', 'g')) > 1024) THEN
        IF outbox.jcs_canonicalize(v_json) IS DISTINCT FROM p_text THEN
            RETURN 'not the RFC 8785 canonical form of its document';
        END IF;
        RETURN NULL;
    END IF;

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
        RETURN 'not canonicalizable under jcs-sha256-v1 (duplicate member name, a number that is not an integer with |n| <= 2^53-1, \u0000 or an unpaired surrogate, nesting deeper than 64, a member name longer than 1024 characters, or a document larger than max_payload_bytes)';
    WHEN invalid_text_representation OR statement_too_complex OR program_limit_exceeded THEN
        RETURN 'not JSON';
END
$fn$;

COMMENT ON FUNCTION outbox._jcs_text_problem(text) IS
    'Private: NULL when the text is exactly the RFC 8785 canonical form of a document the slow path accepts, else a problem (SPEC D-2). Cheap whole-text checks (regex, jsonpath); the full canonicalizer only when they cannot decide.';
REVOKE ALL ON FUNCTION outbox._jcs_text_problem(text) FROM PUBLIC;


-- Per-aggregate claims O(batch) (R-CL-6, R-CL-7): parked successors, released by the outcomes.
-- outbox._release_successors(p_destinations text[], p_event_ids uuid[], p_now timestamptz)
-- RETURNS integer  (private, SPEC R-CL-6, R-CL-7, R-SEC-5)
-- Purpose: per-aggregate ordering keeps a claim O(batch) (R-CL-6) by parking a delivery that
--   waits for an earlier revision at available_at = 'infinity' (append_events does it when an
--   earlier revision of the same aggregate is open for that destination), outside the claim's
--   index range. When deliveries become terminal (acknowledged, quarantined) this releases,
--   for each of their (destination, aggregate) pairs of a per_aggregate destination, the new
--   head of the chain - the lowest open revision - when it is parked: available_at = p_now.
--   One statement; an index probe per pair (outbox_deliveries_open). Ordering itself is still
--   enforced by the claim's NOT EXISTS check (R-CL-7): parking only keeps blocked rows out of
--   the scan, releasing too early could never break the order, and a parked row always has an
--   open earlier revision whose terminal transition releases it (append_events holds that row
--   FOR SHARE while it parks a new revision behind it).
-- Callers: outbox.ack_deliveries, outbox._quarantine_write (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._release_successors(p_destinations text[], p_event_ids uuid[], p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
AS $fn$
DECLARE
    v_count integer;
BEGIN
    IF p_destinations IS NULL
       OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd
                       WHERE dd.destination = ANY (p_destinations) AND dd.ordering = 'per_aggregate') THEN
        RETURN 0;
    END IF;
    WITH done AS (
        SELECT DISTINCT d.destination, d.aggregate_id
          FROM unnest(p_destinations, p_event_ids) AS u(destination, event_id)
          JOIN outbox.delivery_destinations AS dd ON dd.destination = u.destination AND dd.ordering = 'per_aggregate'
          JOIN outbox.outbox_deliveries AS d ON d.destination = u.destination AND d.event_id = u.event_id
    ), heads AS (
        SELECT h.destination, h.event_id
          FROM done
         CROSS JOIN LATERAL (
                SELECT o.destination, o.event_id, o.status
                  FROM outbox.outbox_deliveries AS o
                 WHERE o.destination = done.destination AND o.aggregate_id = done.aggregate_id
                   AND o.status IN ('pending', 'leased')
                 ORDER BY o.aggregate_revision
                 LIMIT 1
              ) AS h
         WHERE h.status = 'pending'
    )
    UPDATE outbox.outbox_deliveries AS d
       SET available_at = p_now
      FROM heads
     WHERE d.destination = heads.destination AND d.event_id = heads.event_id
       AND d.status = 'pending' AND d.available_at = 'infinity';
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$fn$;

COMMENT ON FUNCTION outbox._release_successors(text[], uuid[], timestamptz) IS
    'Private: after deliveries became terminal, make the parked (available_at = infinity) head of each of their per_aggregate chains claimable (SPEC R-CL-6, R-CL-7).';
REVOKE ALL ON FUNCTION outbox._release_successors(text[], uuid[], timestamptz) FROM PUBLIC;

DROP FUNCTION outbox._quarantine_write(text[], uuid[], uuid[], text, text[], text[], text[], timestamptz);
-- outbox._quarantine_write(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[],
--                          p_outcome text, p_reasons text[], p_error_codes text[], p_error_refs text[],
--                          p_now timestamptz) RETURNS integer  (private, SPEC R-AK-5, R-AK-6)
-- Purpose: THE quarantine write, set-based, for deliveries the caller has locked and fenced
--   (quarantine_deliveries, retry_deliveries on exhaustion, recovery of a lease that expired on
--   the last allowed attempt): in one statement append the finish of the current attempt
--   (outcome p_outcome, disposition quarantined), set the delivery terminal quarantined with the
--   lease cleared, and insert the quarantine row with the event digest. Arrays are parallel.
--   Returns the number of deliveries quarantined. Then releases the parked successors of
--   per_aggregate chains (outbox._release_successors).
-- Caller: the dispatch functions (running as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._quarantine_write(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[],
                                         p_outcome text, p_reasons text[], p_error_codes text[],
                                         p_error_refs text[], p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
AS $fn$
DECLARE
    v_count integer;
BEGIN
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
    SELECT pg_catalog.count(*)::integer INTO v_count FROM moved;
    -- a quarantined head no longer holds its aggregate's chain (R-CL-6, R-CL-7)
    PERFORM outbox._release_successors(p_destinations, p_event_ids, p_now);
    RETURN v_count;
END
$fn$;

COMMENT ON FUNCTION outbox._quarantine_write(text[], uuid[], uuid[], text, text[], text[], text[], timestamptz) IS
    'Private: set-based quarantine of locked, fenced deliveries - finish, terminal state, quarantine row (SPEC R-AK-5, R-AK-6).';
REVOKE ALL ON FUNCTION outbox._quarantine_write(text[], uuid[], uuid[], text, text[], text[], text[], timestamptz) FROM PUBLIC;

DROP FUNCTION outbox.ack_deliveries(json);
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
CREATE FUNCTION outbox.ack_deliveries(p_items json)
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
               coalesce(mm.mins, '{}'::bigint[]) AS mins,
               coalesce(mm.required, '{}'::text[]) AS required
          FROM outbox.delivery_destinations AS dd
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         CROSS JOIN LATERAL (
                SELECT pg_catalog.count(*) AS n,
                       pg_catalog.array_agg(m.member ORDER BY m.member COLLATE "C") AS mem,
                       pg_catalog.array_agg(m.json_type ORDER BY m.member COLLATE "C") AS typ,
                       pg_catalog.array_agg(m.minimum ORDER BY m.member COLLATE "C") AS mins,
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
                             outbox._receipt_member_piece(u.rcb, k.mem[1], k.typ[1], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[1]),
                             outbox._receipt_member_piece(u.rcb, k.mem[2], k.typ[2], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[2]),
                             outbox._receipt_member_piece(u.rcb, k.mem[3], k.typ[3], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[3]),
                             outbox._receipt_member_piece(u.rcb, k.mem[4], k.typ[4], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[4]),
                             outbox._receipt_member_piece(u.rcb, k.mem[5], k.typ[5], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[5]),
                             outbox._receipt_member_piece(u.rcb, k.mem[6], k.typ[6], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[6]),
                             outbox._receipt_member_piece(u.rcb, k.mem[7], k.typ[7], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[7]),
                             outbox._receipt_member_piece(u.rcb, k.mem[8], k.typ[8], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[8])
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

DROP FUNCTION outbox.append_events(json, text[], text[]);
-- outbox.append_events(events json, canonical_texts text[] DEFAULT NULL,
--                      event_envelope_sha256s text[] DEFAULT NULL)
--   RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count int)
--   (public, SPEC §3.2, §13, R-AP-1..7, R-AK-9, D-2, D-3; HP-1..4)
-- Purpose: append many EventEnvelope@1 objects inside the caller's business transaction with
--   exactly the rules of outbox.append_event (which is this function with one element): envelope
--   and digest rules (outbox._append_validate), the active definition's quartet frozen, one pending
--   delivery per mandatory member, idempotent re-append of the same digest. One row per element,
--   in input order. The deferred constraint triggers prove every delivery set at COMMIT (R-AP-5).
-- Raises (any invalid element fails the whole call): OB103 no active definition / pair not
--   applicable / no mandatory member; OB105 envelope invalid, eventId reused with other content
--   or archived; OB201 not canonicalizable.
-- Design notes (hot-path predicate, plans, locking): docs/contract.md#outboxappend_events
-- Caller: outbox_producer.
CREATE FUNCTION outbox.append_events(
    p_events json,
    p_canonical_texts text[] DEFAULT NULL,
    p_event_envelope_sha256s text[] DEFAULT NULL
) RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_count     integer;
    v_max_bytes bigint;
BEGIN
    IF p_events IS NULL THEN
        PERFORM outbox._envelope_fail('events is NULL');
    END IF;
    IF pg_catalog.json_typeof(p_events) <> 'array' THEN
        PERFORM outbox._envelope_fail('events must be a JSON array of EventEnvelope@1 objects');
    END IF;
    v_count := pg_catalog.json_array_length(p_events);
    IF (p_canonical_texts IS NULL) <> (p_event_envelope_sha256s IS NULL) THEN
        PERFORM outbox._envelope_fail('canonical_texts and event_envelope_sha256s go together: pass both or neither');
    END IF;
    IF p_canonical_texts IS NOT NULL AND v_count > 0
       AND (pg_catalog.array_ndims(p_canonical_texts) IS DISTINCT FROM 1
            OR pg_catalog.array_ndims(p_event_envelope_sha256s) IS DISTINCT FROM 1
            OR pg_catalog.array_lower(p_canonical_texts, 1) <> 1
            OR pg_catalog.array_lower(p_event_envelope_sha256s, 1) <> 1
            OR pg_catalog.array_length(p_canonical_texts, 1) <> v_count
            OR pg_catalog.array_length(p_event_envelope_sha256s, 1) <> v_count) THEN
        PERFORM outbox._envelope_fail('canonical_texts and event_envelope_sha256s must have one entry per event, from index 1');
    END IF;
    SELECT k.value INTO v_max_bytes FROM outbox.kernel_settings k WHERE k.name = 'max_payload_bytes';

    RETURN QUERY
    WITH f AS MATERIALIZED (
        -- the cheap predicate (builtins only; every cast guarded by the pattern it needs)
        SELECT k.ord, CASE WHEN NOT k.fast THEN k.raw END AS raw, k.ct, k.sha,
               CASE WHEN k.fast THEN k.j END AS j, k.rev, k.occurred, k.fast
          FROM (SELECT j.ord, j.raw, j.ct, j.sha, j.j, j.rev, j.occurred,
               COALESCE(j.j IS NOT NULL
                   AND j.sha = pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(j.ct, 'UTF8')), 'hex')
                   AND j.rev <= 9007199254740991
                   AND j.occurred IS NOT NULL
                   -- (the pattern admits real times only, each written as to_char writes it back)
                   AND NOT EXISTS (SELECT 1 FROM outbox.envelope_refinements r
                                    WHERE r.event_type = j.j ->> 'eventType' AND r.event_schema_version = j.j ->> 'eventSchemaVersion'
                                      AND NOT (CASE WHEN r.required_field = 'projectId' THEN (j.j -> 'tenant') ? 'projectId'
                                                    ELSE j.j ? r.required_field END))
                   AND j.canonical = j.ct, false) AS fast
          FROM (SELECT a.*,
                       CASE WHEN pg_catalog.jsonb_typeof(a.j -> 'aggregateRevision') = 'number'
                                 AND pg_catalog.scale((a.j -> 'aggregateRevision')::numeric) = 0
                                 AND (a.j -> 'aggregateRevision')::numeric BETWEEN 1 AND 9007199254740991
                            THEN (a.j -> 'aggregateRevision')::numeric::bigint END AS rev,
                       -- occurredAt: YYYY-MM-DDTHH:MM:SS.ffffffZ, a real UTC time (year 0001..9999,
                       -- month 01..12, the month's days, hour 00..23, minute and second 00..59)
                       CASE WHEN pg_catalog.length(a.j ->> 'occurredAt') = 27
                                 AND pg_catalog.translate(a.j ->> 'occurredAt', '0123456789', '') = '--T::.Z'
                                 AND pg_catalog.strpos(a.j ->> 'occurredAt', '-') = 5 AND pg_catalog.substr(a.j ->> 'occurredAt', 8, 1) = '-'
                                 AND pg_catalog.strpos(a.j ->> 'occurredAt', 'T') = 11 AND pg_catalog.strpos(a.j ->> 'occurredAt', ':') = 14
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 17, 1) = ':' AND pg_catalog.strpos(a.j ->> 'occurredAt', '.') = 20
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 27, 1) = 'Z'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 1, 4) COLLATE "C" <> '0000'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 6, 2) COLLATE "C" BETWEEN '01' AND '12'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 9, 2) COLLATE "C" BETWEEN '01' AND '31'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 12, 2) COLLATE "C" <= '23'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 15, 2) COLLATE "C" <= '59'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 18, 2) COLLATE "C" <= '59'
                                 AND (pg_catalog.substr(a.j ->> 'occurredAt', 9, 2) COLLATE "C" <= '28'
                                      OR pg_catalog.substr(a.j ->> 'occurredAt', 9, 2)::integer
                                     <= pg_catalog.date_part('day', pg_catalog.make_date(pg_catalog.substr(a.j ->> 'occurredAt', 1, 4)::integer,
                                                                                         pg_catalog.substr(a.j ->> 'occurredAt', 6, 2)::integer, 1)
                                                                    + interval '1 month - 1 day'))
                            THEN (a.j ->> 'occurredAt')::timestamptz END AS occurred,
                       CASE WHEN pg_catalog.jsonb_typeof(a.j) = 'object'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventId') = 'string'
                                 -- (the patterns of outbox._append_validate, written with translate():
                                 -- a regular expression per element cost more than the rest)
                                 AND pg_catalog.length(a.j ->> 'eventId') = 36
                                 AND pg_catalog.translate(a.j ->> 'eventId', '0123456789abcdef', '') = '----'
                                 AND pg_catalog.strpos(a.j ->> 'eventId', '-') = 9
                                 AND pg_catalog.substr(a.j ->> 'eventId', 14, 1) = '-' AND pg_catalog.substr(a.j ->> 'eventId', 19, 1) = '-'
                                 AND pg_catalog.substr(a.j ->> 'eventId', 24, 1) = '-'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventType') = 'string'
                                 AND pg_catalog.translate(pg_catalog.left(a.j ->> 'eventType', 1), 'abcdefghijklmnopqrstuvwxyz0123456789', '') = ''
                                 AND pg_catalog.translate(a.j ->> 'eventType', 'abcdefghijklmnopqrstuvwxyz0123456789._@-', '') = ''
                                 AND pg_catalog.length(a.j ->> 'eventType') > 0
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventSchemaVersion') = 'string'
                                 AND pg_catalog.translate(pg_catalog.left(a.j ->> 'eventSchemaVersion', 1), 'abcdefghijklmnopqrstuvwxyz0123456789', '') = ''
                                 AND pg_catalog.translate(a.j ->> 'eventSchemaVersion', 'abcdefghijklmnopqrstuvwxyz0123456789._@-', '') = ''
                                 AND pg_catalog.length(a.j ->> 'eventSchemaVersion') > 0
                                 AND pg_catalog.jsonb_typeof(a.j -> 'aggregateId') = 'string' AND pg_catalog.length(a.j ->> 'aggregateId') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant') = 'object'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'tenantKind') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'tenantKind') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'tenantId') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'tenantId') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'workspaceId') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'workspaceId') BETWEEN 1 AND 200
                                 AND (NOT (a.j -> 'tenant') ? 'projectId' OR (pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'projectId') = 'string'
                                                                               AND pg_catalog.length(a.j -> 'tenant' ->> 'projectId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'correlationId' OR (pg_catalog.jsonb_typeof(a.j -> 'correlationId') = 'string'
                                                                    AND pg_catalog.length(a.j ->> 'correlationId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'causationId' OR (pg_catalog.jsonb_typeof(a.j -> 'causationId') = 'string'
                                                                  AND pg_catalog.length(a.j ->> 'causationId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'operationId' OR (pg_catalog.jsonb_typeof(a.j -> 'operationId') = 'string'
                                                                  AND pg_catalog.length(a.j ->> 'operationId') BETWEEN 1 AND 200))
                                 AND pg_catalog.jsonb_typeof(a.j -> 'occurredAt') = 'string'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'payload') = 'object'
                            THEN
                       -- the RFC 8785 text of the envelope, members in their fixed order: only the
                       -- EventEnvelope@1 fields are rebuilt (absent required ones make it NULL), so
                       -- an unknown field, an unknown tenant field or a duplicate name makes it
                       -- differ from the submitted text
                       '{"aggregateId":' || (a.j -> 'aggregateId')::text
                       || ',"aggregateRevision":' || (a.j -> 'aggregateRevision')::text
                       || COALESCE(',"causationId":' || (a.j -> 'causationId')::text, '')
                       || COALESCE(',"correlationId":' || (a.j -> 'correlationId')::text, '')
                       || ',"eventId":' || (a.j -> 'eventId')::text
                       || ',"eventSchemaVersion":' || (a.j -> 'eventSchemaVersion')::text
                       || ',"eventType":' || (a.j -> 'eventType')::text
                       || ',"occurredAt":' || (a.j -> 'occurredAt')::text
                       || COALESCE(',"operationId":' || (a.j -> 'operationId')::text, '')
                       || ',"payload":' || (SELECT '{' || COALESCE(pg_catalog.string_agg(
                              CASE WHEN pg_catalog.octet_length(e1.key) = pg_catalog.length(e1.key) AND pg_catalog.octet_length(e1.key) <= 1024
                                   THEN pg_catalog.to_json(e1.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e1.value)
                                       WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                           CASE WHEN pg_catalog.octet_length(e2.key) = pg_catalog.length(e2.key) AND pg_catalog.octet_length(e2.key) <= 1024
                                                THEN pg_catalog.to_json(e2.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e2.value)
                                                    WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                                        CASE WHEN pg_catalog.octet_length(e3.key) = pg_catalog.length(e3.key) AND pg_catalog.octet_length(e3.key) <= 1024
                                                             THEN pg_catalog.to_json(e3.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e3.value)
                                                                 WHEN 'number' THEN CASE WHEN pg_catalog.scale((e3.value)::numeric) = 0 AND pg_catalog.abs((e3.value)::numeric) <= 9007199254740991 THEN (e3.value)::text END
                                                                 WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                                 ELSE (e3.value)::text END END,
                                                        ',' ORDER BY e3.key COLLATE "C"), '') || '}'
                                                       FROM pg_catalog.jsonb_each(e2.value) AS e3)
                                                    WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                                        CASE pg_catalog.jsonb_typeof(a3.value)
                                                            WHEN 'number' THEN CASE WHEN pg_catalog.scale((a3.value)::numeric) = 0 AND pg_catalog.abs((a3.value)::numeric) <= 9007199254740991 THEN (a3.value)::text END
                                                            WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                            ELSE (a3.value)::text END,
                                                        ',' ORDER BY a3.ordinality), '') || ']'
                                                       FROM pg_catalog.jsonb_array_elements(e2.value) WITH ORDINALITY AS a3(value, ordinality))
                                                    WHEN 'number' THEN CASE WHEN pg_catalog.scale((e2.value)::numeric) = 0 AND pg_catalog.abs((e2.value)::numeric) <= 9007199254740991 THEN (e2.value)::text END
                                                    ELSE (e2.value)::text END END,
                                           ',' ORDER BY e2.key COLLATE "C"), '') || '}'
                                          FROM pg_catalog.jsonb_each(e1.value) AS e2)
                                       WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                           CASE pg_catalog.jsonb_typeof(a2.value)
                                               WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                                   CASE WHEN pg_catalog.octet_length(e3.key) = pg_catalog.length(e3.key) AND pg_catalog.octet_length(e3.key) <= 1024
                                                        THEN pg_catalog.to_json(e3.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e3.value)
                                                            WHEN 'number' THEN CASE WHEN pg_catalog.scale((e3.value)::numeric) = 0 AND pg_catalog.abs((e3.value)::numeric) <= 9007199254740991 THEN (e3.value)::text END
                                                            WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                            ELSE (e3.value)::text END END,
                                                   ',' ORDER BY e3.key COLLATE "C"), '') || '}'
                                                  FROM pg_catalog.jsonb_each(a2.value) AS e3)
                                               WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                                   CASE pg_catalog.jsonb_typeof(a3.value)
                                                       WHEN 'number' THEN CASE WHEN pg_catalog.scale((a3.value)::numeric) = 0 AND pg_catalog.abs((a3.value)::numeric) <= 9007199254740991 THEN (a3.value)::text END
                                                       WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                       ELSE (a3.value)::text END,
                                                   ',' ORDER BY a3.ordinality), '') || ']'
                                                  FROM pg_catalog.jsonb_array_elements(a2.value) WITH ORDINALITY AS a3(value, ordinality))
                                               WHEN 'number' THEN CASE WHEN pg_catalog.scale((a2.value)::numeric) = 0 AND pg_catalog.abs((a2.value)::numeric) <= 9007199254740991 THEN (a2.value)::text END
                                               ELSE (a2.value)::text END,
                                           ',' ORDER BY a2.ordinality), '') || ']'
                                          FROM pg_catalog.jsonb_array_elements(e1.value) WITH ORDINALITY AS a2(value, ordinality))
                                       WHEN 'number' THEN CASE WHEN pg_catalog.scale((e1.value)::numeric) = 0 AND pg_catalog.abs((e1.value)::numeric) <= 9007199254740991 THEN (e1.value)::text END
                                       ELSE (e1.value)::text END END,
                              ',' ORDER BY e1.key COLLATE "C"), '') || '}'
                             FROM pg_catalog.jsonb_each(a.j -> 'payload') AS e1)
                       || ',"tenant":{' || pg_catalog.concat_ws(',',
                              '"projectId":' || (a.j -> 'tenant' -> 'projectId')::text,
                              '"tenantId":' || (a.j -> 'tenant' -> 'tenantId')::text,
                              '"tenantKind":' || (a.j -> 'tenant' -> 'tenantKind')::text,
                              '"workspaceId":' || (a.j -> 'tenant' -> 'workspaceId')::text) || '}}'
                       END AS canonical
                  FROM (
                -- parsed once: the element's text (json_array_elements), its canonical text and digest,
                -- and ONE jsonb of it on the hot path (a \u0000 escape, which no jsonb can hold, and an
                -- oversized element are left to the full rule, which raises what it always did)
                SELECT x.ord::integer AS ord, x.raw, t.ct, t.sha,
                       CASE WHEN t.ct IS NOT NULL AND t.sha IS NOT NULL AND pg_catalog.octet_length(t.ct) <= v_max_bytes
                                 AND x.raw::text = t.ct AND pg_catalog.strpos(t.ct, '\u0000') = 0
                            THEN t.ct::jsonb END AS j
                  FROM pg_catalog.json_array_elements(p_events) WITH ORDINALITY AS x(raw, ord)
                 CROSS JOIN LATERAL (SELECT p_canonical_texts[x.ord::integer] AS ct,
                                            p_event_envelope_sha256s[x.ord::integer] AS sha) AS t
                        OFFSET 0) AS a
                OFFSET 0) AS j
                OFFSET 0) AS k
    ), v AS MATERIALIZED (
        -- accepted by the predicate: the typed columns straight from the jsonb
        SELECT f.ord, (f.j ->> 'eventId')::uuid AS event_id, f.j ->> 'eventType' AS event_type,
               f.j ->> 'eventSchemaVersion' AS schema_version, f.j ->> 'aggregateId' AS aggregate_id,
               f.rev AS aggregate_revision, f.j -> 'tenant' ->> 'tenantKind' AS tenant_kind,
               f.j -> 'tenant' ->> 'tenantId' AS tenant_id, f.j -> 'tenant' ->> 'workspaceId' AS workspace_id,
               f.j -> 'tenant' ->> 'projectId' AS project_id, f.j ->> 'correlationId' AS correlation_id,
               f.j ->> 'causationId' AS causation_id, f.j ->> 'operationId' AS operation_id,
               f.j -> 'payload' AS event_payload, f.occurred AS occurred_at,
               f.sha AS event_envelope_sha256, f.ct AS event_envelope_canonical
          FROM f
         WHERE f.fast
        UNION ALL
        -- every other element: the full rule, element by element in input order (the first
        -- break raises its SQLSTATE and detail)
        SELECT e.ord, (e.r).*
          FROM (SELECT s.ord,
                       outbox._append_validate(s.raw, s.ct, s.sha, v_max_bytes,
                                               CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', s.ord - 1)
                                                    ELSE '' END) AS r
                  FROM (SELECT f.ord, f.raw, f.ct, f.sha FROM f WHERE NOT f.fast ORDER BY f.ord) AS s
                OFFSET 0) AS e
    ), c AS MATERIALIZED (
        -- (scalar subqueries, not joins: one primary-key lookup per element whatever the
        -- planner believes about the tables' sizes when the plan is cached)
        SELECT v.*, a.delivery_set_version, a.definition_schema_version, a.digest_algorithm_version,
               a.definition_digest,
               (SELECT x.event_envelope_sha256 FROM outbox.outbox_events x WHERE x.event_id = v.event_id) AS existing_sha256,
               -- R-RT-1: one primary-key probe of the archive per element
               EXISTS (SELECT 1 FROM outbox.archived_events x WHERE x.event_id = v.event_id) AS archived,
               (SELECT pg_catalog.count(*) FROM outbox.delivery_set_members m
                 WHERE m.delivery_set_version = a.delivery_set_version AND m.event_type = v.event_type
                   AND m.event_schema_version = v.schema_version AND m.mandatory)::integer AS members,
               pg_catalog.min(v.event_envelope_sha256) OVER same_id AS min_sha256,
               pg_catalog.max(v.event_envelope_sha256) OVER same_id AS max_sha256,
               pg_catalog.min(v.ord) OVER same_id AS first_ord
          FROM v
          LEFT JOIN outbox.delivery_set_versions a ON a.status = 'active'
        WINDOW same_id AS (PARTITION BY v.event_id)
    ), checked AS MATERIALIZED (
        -- The definition rules, element by element in input order; the first break raises.
        SELECT o.*
          FROM (SELECT c.*, CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', c.ord - 1) ELSE '' END AS label
                  FROM c ORDER BY c.ord) AS o
         WHERE (CASE
                  WHEN o.delivery_set_version IS NULL THEN
                      outbox._append_fail('OB103', 'no active delivery-set definition', NULL,
                          'register and activate a delivery set (outboxctl release register / activate)')
                  WHEN NOT EXISTS (SELECT 1 FROM outbox.delivery_set_applicable_events ae
                                    WHERE ae.delivery_set_version = o.delivery_set_version
                                      AND ae.event_type = o.event_type AND ae.event_schema_version = o.schema_version) THEN
                      outbox._append_fail('OB103', 'event pair not applicable under the active delivery set',
                          o.label || pg_catalog.format('(%s, %s) is not applicable in delivery set version %s',
                                            o.event_type, o.schema_version, o.delivery_set_version), NULL)
                  WHEN o.archived THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s was archived by the retention procedure and can never be appended again', o.event_id), NULL)
                  WHEN o.existing_sha256 <> o.event_envelope_sha256 THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s already exists with a different envelope digest', o.event_id), NULL)
                  WHEN o.min_sha256 <> o.max_sha256 THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s appears more than once with different envelope digests', o.event_id), NULL)
                  WHEN o.existing_sha256 IS NULL AND o.members = 0 THEN
                      outbox._append_fail('OB103', 'no mandatory member for this event pair',
                          o.label || pg_catalog.format('(%s, %s) has no mandatory member in delivery set version %s',
                                            o.event_type, o.schema_version, o.delivery_set_version), NULL)
                END) IS NULL
    ), fresh AS MATERIALIZED (
        -- new events, each once even when the call repeats it
        SELECT k.* FROM checked k WHERE k.existing_sha256 IS NULL AND k.ord = k.first_ord
    ), chain AS MATERIALIZED (
        -- per_aggregate destinations (R-CL-6, R-CL-7): a new delivery that waits behind an earlier
        -- revision of its aggregate - open in the table, or earlier in this call - is parked at
        -- available_at = 'infinity', outside the claim's index range, so blocked chains cost a
        -- claim nothing; outbox._release_successors makes it claimable when the head ends.
        SELECT f.event_id, m.destination, f.aggregate_id, f.aggregate_revision,
               pg_catalog.row_number() OVER (PARTITION BY m.destination, f.aggregate_id
                                             ORDER BY f.aggregate_revision, f.ord) AS in_call
          FROM fresh f
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = f.delivery_set_version AND m.event_type = f.event_type
           AND m.event_schema_version = f.schema_version AND m.mandatory
          JOIN outbox.delivery_destinations dd ON dd.destination = m.destination AND dd.ordering = 'per_aggregate'
    ), heads AS MATERIALIZED (
        -- the lowest open revision of each such chain
        SELECT h.destination, h.event_id
          FROM (SELECT DISTINCT c.destination, c.aggregate_id FROM chain c) AS k
         CROSS JOIN LATERAL (
                SELECT o.destination, o.event_id
                  FROM outbox.outbox_deliveries o
                 WHERE o.destination = k.destination AND o.aggregate_id = k.aggregate_id
                   AND o.status IN ('pending', 'leased')
                 ORDER BY o.aggregate_revision
                 LIMIT 1) AS h
    ), held AS MATERIALIZED (
        -- held FOR SHARE until commit (in the key order outcome functions lock in): the head
        -- cannot become terminal - and release its successors - before this transaction's parked
        -- rows are visible; one that became terminal meanwhile drops out here (re-checked).
        SELECT d.destination, d.aggregate_id, d.aggregate_revision
          FROM outbox.outbox_deliveries d
          JOIN heads ON d.destination = heads.destination AND d.event_id = heads.event_id
         WHERE d.status IN ('pending', 'leased')
         ORDER BY d.destination, d.event_id
           FOR SHARE OF d
    ), parked AS MATERIALIZED (
        SELECT c.event_id, c.destination
          FROM chain c
         WHERE c.in_call > 1
            OR EXISTS (SELECT 1 FROM held h
                        WHERE h.destination = c.destination AND h.aggregate_id = c.aggregate_id
                          AND h.aggregate_revision < c.aggregate_revision)
    ), inserted_events AS (
        INSERT INTO outbox.outbox_events
            (event_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
             delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
             aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id,
             correlation_id, causation_id, operation_id, event_payload,
             event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, event_envelope_canonical)
        SELECT f.event_id, f.event_type, f.schema_version, f.delivery_set_version, f.definition_schema_version,
               f.digest_algorithm_version, f.definition_digest,
               f.aggregate_id, f.aggregate_revision, f.tenant_kind, f.tenant_id, f.workspace_id, f.project_id,
               f.correlation_id, f.causation_id, f.operation_id, f.event_payload,
               'jcs-sha256-v1', f.event_envelope_sha256, f.occurred_at, f.event_envelope_canonical
          FROM fresh f
        RETURNING outbox_events.event_id
    ), inserted_deliveries AS (
        -- one pending delivery per mandatory member (R-AP-4, R-AP-6)
        INSERT INTO outbox.outbox_deliveries
            (destination, event_id, delivery_set_version, consumer_name, expected_receipt_type,
             expected_receipt_schema_version, required_projection_name, required_projection_version,
             mandatory, aggregate_id, aggregate_revision, available_at)
        SELECT m.destination, f.event_id, m.delivery_set_version, m.consumer_name, m.expected_receipt_type,
               m.expected_receipt_schema_version, m.projection_name, m.projection_version,
               true, f.aggregate_id, f.aggregate_revision,
               CASE WHEN EXISTS (SELECT 1 FROM parked p WHERE p.event_id = f.event_id AND p.destination = m.destination)
                    THEN 'infinity'::timestamptz ELSE pg_catalog.now() END
          FROM fresh f
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = f.delivery_set_version AND m.event_type = f.event_type
           AND m.event_schema_version = f.schema_version AND m.mandatory
        RETURNING outbox_deliveries.destination
    ), notified AS (
        SELECT pg_catalog.count(pg_catalog.pg_notify('outbox_delivery', n.destination)) AS destinations
          FROM (SELECT DISTINCT d.destination FROM inserted_deliveries d) AS n
    )
    SELECT k.event_id, k.event_envelope_sha256,
           CASE WHEN k.existing_sha256 IS NULL THEN k.members
                ELSE (SELECT pg_catalog.count(*)::integer FROM outbox.outbox_deliveries d WHERE d.event_id = k.event_id) END
      FROM checked k
     CROSS JOIN notified
     ORDER BY k.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.append_events(json, text[], text[]) IS
    'Append many EventEnvelope@1 objects (a JSON array) with the rules of append_event, set-based; rows in input order (SPEC §3.2, §13, R-AK-9, D-2). Raises OB103, OB105, OB201. Caller: outbox_producer.';
REVOKE ALL ON FUNCTION outbox.append_events(json, text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_events(json, text[], text[]) TO outbox_producer;

DROP FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text);
-- outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval)
-- RETURNS TABLE(destination, consumer_name, event_id, attempt_id, lease_token, lease_expires_at, ...,
--   event_envelope jsonb, event_envelope_sha256, event_envelope_canonical)  (columns: see CREATE below)
--   (public, SPEC R-CL-1, R-CL-2, R-CL-5, R-CL-6, R-CL-7, R-PV-2, §13; HP-1, HP-3)
-- Purpose: lease up to p_batch_size claimable deliveries (pending, available_at <= now) of the given
--   destinations to p_worker, in (available_at, created_at, event_id) order, after a bounded
--   recovery of expired leases; per-aggregate ordering and claim pauses respected; O(batch), never
--   O(backlog). event_envelope_canonical is the verified canonical text (send it as is, P-5).
-- Time: clock_timestamp() once per call. Run it in its own short transaction (R-CL-5).
-- SQLSTATEs: 22023 invalid_parameter_value for a worker that is not a literal, an empty/NULL or
--   unregistered destination, a batch size outside 1..1000, a lease outside 1 second..1 hour.
-- Design notes (steps, plans, locking): docs/performance-notes.md#outboxclaim_deliveries
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
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now          timestamptz := pg_catalog.clock_timestamp();
    v_destinations text[];
    v_claimable    text[];
    v_bad          text;
    v_expired      boolean;
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
    -- one statement for the four look-ups before the claim: the first unknown destination, the
    -- distinct sorted list, the same list without paused destinations (R-PV-2: a primary-key
    -- probe of outbox.destination_claim_pauses per destination) and the lease-expiry probe (an
    -- index probe of the small leased index, outbox_deliveries_leased; its answer is used only
    -- when every destination is known)
    SELECT (SELECT coalesce(u.d, 'NULL')
              FROM pg_catalog.unnest(p_destinations) AS u(d)
             WHERE u.d IS NULL
                OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = u.d)
             LIMIT 1),
           (SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) FROM pg_catalog.unnest(p_destinations) AS u(d)),
           (SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) FROM pg_catalog.unnest(p_destinations) AS u(d)
             WHERE NOT EXISTS (SELECT 1 FROM outbox.destination_claim_pauses AS cp WHERE cp.destination = u.d)),
           -- (the destination test is a filter only - IS TRUE is not indexable - so the probe is
           -- always a range scan of the leased index, never a scan of the open-deliveries index by
           -- destination that a plan on unanalyzed tables may prefer: HP-3)
           EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS x
                    WHERE x.status = 'leased' AND x.lease_expires_at <= v_now
                      AND (x.destination = ANY (p_destinations)) IS TRUE)
      INTO v_bad, v_destinations, v_claimable, v_expired;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'claim_deliveries: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %s is not registered in outbox.delivery_destinations', v_bad);
    END IF;

    -- 1. bounded recovery of expired leases of these destinations (R-CL-2), only when one
    --    exists (R-SEC-5: a burst of wake-ups must not multiply the recovery work)
    IF v_expired THEN
        PERFORM outbox._dispatch_recover(v_destinations, p_batch_size, v_now);
    END IF;
    IF v_claimable IS NULL THEN
        RETURN; -- every destination is paused (R-PV-2)
    END IF;

    -- 2. claim (R-CL-1), one statement. Static SQL under plan_cache_mode = force_custom_plan
    -- (the function's SET clause, HP-3): parsed once per session, planned for the actual
    -- arguments on every call, so no generic plan made while the table was small or unanalyzed
    -- (LIMIT $n estimated at 10 % of the table, an index scanned by destination only) is ever
    -- reused. The statement is also shaped to stay O(batch) whatever the statistics say: the
    -- UPDATE finds the locked rows by ctid (TID scan; locked by this transaction, so their ctid
    -- cannot change), and the event of each claimed row is fetched by primary key in a
    -- LATERAL ... LIMIT 1 (never a hash join over the events table).
    RETURN QUERY
    WITH dest AS (
        SELECT dd.destination AS dest_name, dd.ordering AS dest_ordering
          FROM outbox.delivery_destinations AS dd
         WHERE dd.destination = ANY (v_claimable)
    ), picked AS (
        SELECT c.row_ctid
          FROM dest
         CROSS JOIN LATERAL (
                SELECT d.ctid AS row_ctid, d.available_at, d.created_at, d.event_id
                  FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = dest.dest_name
                   AND d.status = 'pending'
                   AND d.available_at <= v_now
                   AND (dest.dest_ordering = 'none'
                        OR NOT EXISTS (
                               SELECT 1
                                 FROM outbox.outbox_deliveries AS prior
                                WHERE prior.destination = d.destination
                                  AND prior.aggregate_id = d.aggregate_id
                                  AND prior.aggregate_revision < d.aggregate_revision
                                  AND prior.status IN ('pending', 'leased')))
                 ORDER BY d.available_at, d.created_at, d.event_id
                 LIMIT p_batch_size
                   FOR UPDATE OF d SKIP LOCKED
              ) AS c
         ORDER BY c.available_at, c.created_at, c.event_id
         LIMIT p_batch_size
    ), claimed AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status             = 'leased',
               lease_owner        = p_worker,
               lease_token        = pg_catalog.gen_random_uuid(),
               lease_expires_at   = v_now + p_lease,
               current_attempt_id = pg_catalog.gen_random_uuid(),
               attempt_count      = d.attempt_count + 1,
               last_attempt_at    = v_now
         WHERE d.ctid = ANY (ARRAY(SELECT picked.row_ctid FROM picked))
           -- true of every picked row (locked, so unchanged); written as one row comparison so
           -- it can only be a filter: the rows are found by ctid (a TID scan), never through the
           -- claimable index that a plan on small or unanalyzed tables might prefer (HP-3)
           AND (d.status, d.destination = ANY (v_claimable), d.available_at <= v_now)
               IS NOT DISTINCT FROM ('pending', true, true)
        RETURNING d.destination AS c_destination, d.event_id AS c_event_id, d.consumer_name AS c_consumer_name,
                  d.current_attempt_id AS c_attempt_id, d.lease_token AS c_lease_token,
                  d.lease_expires_at AS c_lease_expires_at, d.attempt_count AS c_attempt_count,
                  d.expected_receipt_type AS c_receipt_type, d.expected_receipt_schema_version AS c_receipt_version,
                  d.required_projection_name AS c_projection_name, d.required_projection_version AS c_projection_version,
                  d.available_at AS c_available_at, d.created_at AS c_created_at
    ), started AS (
        -- the immutable attempt starts, one set-based INSERT (HP-5); no foreign key check per
        -- row: each start is built from the delivery row this statement just updated
        -- (migration 019 dropped the start -> delivery foreign key, see its header)
        INSERT INTO outbox.outbox_delivery_attempt_starts
               (attempt_id, destination, event_id, attempt_number, lease_token, worker, started_at)
        SELECT c.c_attempt_id, c.c_destination, c.c_event_id, c.c_attempt_count, c.c_lease_token, p_worker, v_now
          FROM claimed AS c
    )
    SELECT c.c_destination, c.c_consumer_name, c.c_event_id, c.c_attempt_id, c.c_lease_token,
           c.c_lease_expires_at, c.c_attempt_count, c.c_receipt_type,
           c.c_receipt_version, c.c_projection_name,
           c.c_projection_version, ev.envelope,
           ev.event_envelope_digest_algorithm_version, ev.event_envelope_sha256,
           ev.event_type, ev.schema_version, ev.canonical
      FROM claimed AS c
     CROSS JOIN LATERAL (
            SELECT CASE WHEN e.event_envelope_canonical IS NULL THEN outbox._event_envelope(e)
                        WHEN p_envelope = 'canonical' THEN NULL
                        ELSE e.event_envelope_canonical::jsonb END AS envelope,
                   e.event_envelope_digest_algorithm_version,
                   e.event_envelope_sha256, e.event_type, e.schema_version,
                   e.event_envelope_canonical AS canonical
              FROM outbox.outbox_events AS e
             WHERE e.event_id = c.c_event_id
             LIMIT 1
          ) AS ev
     ORDER BY c.c_available_at, c.c_created_at, c.c_event_id;
END
$fn$;

COMMENT ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) IS
    'Lease up to batch_size claimable deliveries (pending, available) of the destinations to worker, ordered by available_at, created_at, event_id; FOR UPDATE SKIP LOCKED; appends one attempt start per row; recovers expired leases of those destinations first. 22023 on invalid arguments. SPEC R-CL-1, R-CL-2, R-CL-6, R-CL-7.';
REVOKE ALL ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) TO outbox_dispatcher;

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
-- Registry and kernel reference tables (SPEC R-SEC-3, R-SEC-5): TRUNCATE bypasses the row
-- triggers that refuse DELETE, so every such table refuses it too (OB202), the owner included.
-- receipt_kind_members, envelope_refinements and error_codes are immutable like the rest of the
-- registry; kernel_settings rows may be tuned (UPDATE) by the owner but never removed (a missing
-- max_payload_bytes would lift the size bound).
CREATE TRIGGER tg_delivery_set_versions__no_truncate BEFORE TRUNCATE ON outbox.delivery_set_versions
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_members__no_truncate BEFORE TRUNCATE ON outbox.delivery_set_members
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_applicable_events__no_truncate BEFORE TRUNCATE ON outbox.delivery_set_applicable_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_destinations__no_truncate BEFORE TRUNCATE ON outbox.delivery_destinations
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kinds__no_truncate BEFORE TRUNCATE ON outbox.receipt_kinds
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kind_members__immutable BEFORE UPDATE OR DELETE ON outbox.receipt_kind_members
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kind_members__no_truncate BEFORE TRUNCATE ON outbox.receipt_kind_members
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_envelope_refinements__immutable BEFORE UPDATE OR DELETE ON outbox.envelope_refinements
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_envelope_refinements__no_truncate BEFORE TRUNCATE ON outbox.envelope_refinements
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_error_codes__immutable BEFORE UPDATE OR DELETE ON outbox.error_codes
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_error_codes__no_truncate BEFORE TRUNCATE ON outbox.error_codes
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_kernel_settings__no_delete BEFORE DELETE ON outbox.kernel_settings
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_kernel_settings__no_truncate BEFORE TRUNCATE ON outbox.kernel_settings
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_consumer_roles__immutable BEFORE UPDATE OR DELETE ON inbox.consumer_roles
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_consumer_roles__no_truncate BEFORE TRUNCATE ON inbox.consumer_roles
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();


-- Bounded retry policies (D-5, R-SEC-5): no policy can park a delivery for years or overflow.
ALTER TABLE outbox.outbox_retry_policies
    ADD CONSTRAINT outbox_retry_policies_bounds
    CHECK (base_delay <= interval '1 hour' AND max_delay <= interval '1 day');
DROP FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer);
-- outbox.set_retry_policy(p_destination text, p_base_delay interval, p_multiplier numeric,
--                         p_max_delay interval, p_jitter numeric, p_max_attempts integer)
-- RETURNS integer  (public, operators; SPEC §2, D-5, R-AK-5)
-- Purpose: insert or change the retry policy of a registered destination; returns the new
--   policy_version (1 for a new row, bumped by the trigger on every change). Every change is
--   recorded in outbox.outbox_retry_policy_history by tg_outbox_retry_policies__history
--   (changed_by = session_user). An unchanged policy is not rewritten (same version returned).
--   Applies to retries scheduled after the change; available_at already computed stays.
-- Locking: the policy row (upsert).
-- SQLSTATEs: 22023 unknown destination or a value out of range: base_delay > 0,
--   1 <= multiplier <= 10, max_delay >= base_delay, 0 <= jitter < 1, 1 <= max_attempts <= 1000,
--   base_delay <= 1 hour and max_delay <= 1 day (R-SEC-5: no policy parks a delivery for years
--   or overflows the backoff arithmetic).
-- Caller: outbox_registrar (and outbox_owner).
CREATE FUNCTION outbox.set_retry_policy(p_destination text, p_base_delay interval, p_multiplier numeric,
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
    IF NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = p_destination) THEN
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
    'Insert or change a destination''s retry policy (versioned, every change recorded in outbox_retry_policy_history); returns the policy_version. 22023 on unknown destination or out-of-range values. SPEC D-5.';
REVOKE ALL ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) TO outbox_registrar;


RESET ROLE;
