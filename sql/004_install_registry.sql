-- Destination and delivery-set registry (SPEC §3.1, R-DS-1..6, §3.4 reference destinations).
SET LOCAL ROLE outbox_owner;

-- Receipt kinds (SPEC R-AK-1, R-AK-1a): the closed union of ActiveConsumerAck@1.appliedReceipt.
INSERT INTO outbox.receipt_kinds (receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version) VALUES
    ('operations_projection', 'OperationsProjectionAppliedReceipt', 'operationsProjectionAppliedReceipt', 'appliedAt', 1),
    ('metering_input_processor', 'MeteringInputProcessorConsumerReceipt', 'meteringInputProcessorConsumerReceipt', 'committedAt', 1),
    ('billing_finalization_coordinator', 'BillingFinalizationCoordinatorConsumerReceipt', 'billingFinalizationCoordinatorConsumerReceipt', 'committedAt', 1),
    ('billing_settlement_catch_up', 'BillingSettlementCatchUpConsumerReceipt', 'billingSettlementCatchUpConsumerReceipt', 'committedAt', 1),
    ('broker_publication', 'BrokerPublicationReceipt', 'brokerPublicationReceipt', 'publishedAt', 1);

-- Per-pair envelope refinements (SPEC R-AP-7): fields an envelope of that pair must carry.
CREATE TABLE outbox.envelope_refinements (
    event_type           text NOT NULL,
    event_schema_version text NOT NULL,
    required_field       text NOT NULL CHECK (required_field IN ('correlationId', 'causationId', 'operationId', 'projectId')),
    PRIMARY KEY (event_type, event_schema_version, required_field)
);
INSERT INTO outbox.envelope_refinements VALUES
    ('run.created@2.0', '2.0', 'correlationId'),
    ('run.created@2.0', '2.0', 'operationId'),
    ('wallet.reserved@2.0', '2.0', 'correlationId'),
    ('wallet.reserved@2.0', '2.0', 'operationId'),
    ('wallet.reserved@2.0', '2.0', 'causationId');

-- outbox._registry_fail(detail): raise OB101 (delivery-set definition invalid) with a detail.
-- Private helper of register_delivery_set; granted to nobody.
CREATE FUNCTION outbox._registry_fail(p_detail text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'delivery-set definition invalid' USING ERRCODE = 'OB101', DETAIL = p_detail;
END
$fn$;
REVOKE ALL ON FUNCTION outbox._registry_fail(text) FROM PUBLIC;

-- outbox._json_int(value jsonb): the value as bigint when it is a JSON number denoting an
-- integer with |n| <= 2^53-1, else NULL. Private helper; granted to nobody.
-- No SET search_path on purpose: a LANGUAGE sql function with SET is never inlined (measured
-- ~90 µs per call on the append hot path); every name is schema-qualified.
CREATE FUNCTION outbox._json_int(p_value jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE
        WHEN pg_catalog.jsonb_typeof(p_value) = 'number'
             AND (p_value #>> '{}')::numeric = pg_catalog.trunc((p_value #>> '{}')::numeric)
             AND pg_catalog.abs((p_value #>> '{}')::numeric) <= 9007199254740991
        THEN (p_value #>> '{}')::numeric::bigint
    END
$fn$;
REVOKE ALL ON FUNCTION outbox._json_int(jsonb) FROM PUBLIC;

-- outbox.register_destination(destination, consumer_name, receipt_kind, receipt_type,
--                             receipt_schema_version, projection_required, ordering)
-- Purpose: insert-or-compare one row of the canonical destination registry (SPEC §2, §3.4,
--   R-CL-7 ordering option). Re-registering the identical destination is a no-op; any
--   difference (a destination rebound to another consumer, another receipt, another
--   projection branch or ordering) is refused: destinations are immutable once registered.
--   A new destination gets the default retry policy row (SPEC §2).
-- Locking: the destination row (ON CONFLICT) only.
-- Raises: OB101 invalid literal, unknown receipt kind, receipt type/schema not those of the
--   kind, or a conflicting re-registration.
-- Caller: outbox_registrar.
CREATE FUNCTION outbox.register_destination(
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
        INSERT INTO outbox.outbox_retry_policies (destination, base_delay, multiplier, max_delay, jitter, max_attempts)
        VALUES (p_destination, interval '1 second', 2, interval '5 minutes', 0.2, 20)
        ON CONFLICT (destination) DO NOTHING;
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
-- Locking: a transaction advisory lock per delivery_set_version serializes concurrent
--   registrations of the same version.
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
    PERFORM pg_advisory_xact_lock(hashtext('pgoutbox.delivery_set_version'), v_version::integer);
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

-- outbox.activate_delivery_set(delivery_set_version, definition_schema_version,
--                              digest_algorithm_version, definition_digest)
-- Purpose: make the registered definition named by its full quartet the one active version of
--   this database (R-DS-5); the previously active version becomes 'retired' (it may be selected
--   again later: activation only ever selects a registered definition, never defines one).
--   Events appended afterwards freeze the new quartet; history is never reinterpreted (R-DS-6).
-- Locking: an exclusive transaction advisory lock serializes activations; the unique partial
--   index delivery_set_versions_one_active guarantees one active row.
-- Raises: OB101 when no registered definition has exactly that quartet.
-- Caller: outbox_registrar.
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
    v_status text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pgoutbox.activate_delivery_set'));
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
    'Make one registered delivery-set quartet the active version (SPEC R-DS-5). Raises OB101. Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) TO outbox_registrar;


-- The four reference destinations (SPEC §3.4) with their default retry policies.
SELECT outbox.register_destination('core_operations', 'operations_projector', 'operations_projection',
                                   'OperationsProjectionAppliedReceipt', 1, true, 'none');
SELECT outbox.register_destination('metering_input_processor', 'metering_input_processor_consumer',
                                   'metering_input_processor', 'MeteringInputProcessorConsumerReceipt', 1, false, 'none');
SELECT outbox.register_destination('billing_finalization_coordinator', 'billing_finalization_coordinator_consumer',
                                   'billing_finalization_coordinator', 'BillingFinalizationCoordinatorConsumerReceipt', 1, false, 'none');
SELECT outbox.register_destination('billing_settlement_catch_up', 'billing_settlement_catch_up_consumer',
                                   'billing_settlement_catch_up', 'BillingSettlementCatchUpConsumerReceipt', 1, false, 'none');

-- Registry immutability (SPEC R-SEC-3): definitions, their members and applicable events, and
-- destinations never change once registered; a definition's status and activated_at are the
-- only mutable registry metadata, and only through activate_delivery_set's transitions.
CREATE FUNCTION outbox.tg_registry__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'delivery_set_versions' THEN
        IF (NEW.delivery_set_version, NEW.definition_schema_version, NEW.digest_algorithm_version,
            NEW.definition_digest, NEW.definition, NEW.source_release, NEW.registered_at)
           IS NOT DISTINCT FROM
           (OLD.delivery_set_version, OLD.definition_schema_version, OLD.digest_algorithm_version,
            OLD.definition_digest, OLD.definition, OLD.source_release, OLD.registered_at)
           AND NEW.status IN ('active', 'retired') THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.% is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'registry rows are immutable; only a definition''s status/activated_at change, through activate_delivery_set';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_registry__immutable() FROM PUBLIC;

CREATE TRIGGER tg_delivery_set_versions__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_versions
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_members__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_members
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_applicable_events__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_applicable_events
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_destinations__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_destinations
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kinds__immutable BEFORE UPDATE OR DELETE ON outbox.receipt_kinds
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();


-- Grants (SPEC R-SEC-1): the registrar acts through the functions and may read the registry;
-- the auditor reads it. Nobody but the owner writes these tables.
GRANT USAGE ON SCHEMA outbox TO outbox_registrar, outbox_producer, outbox_dispatcher, outbox_consumer, outbox_auditor;
GRANT SELECT ON outbox.receipt_kinds, outbox.delivery_destinations, outbox.delivery_set_versions,
                outbox.delivery_set_applicable_events, outbox.delivery_set_members, outbox.envelope_refinements
    TO outbox_registrar, outbox_auditor;

RESET ROLE;
