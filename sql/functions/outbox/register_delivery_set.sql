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
CREATE OR REPLACE FUNCTION outbox.register_delivery_set(p_definition json, p_source_release text)
 RETURNS TABLE(delivery_set_version integer, definition_schema_version integer, digest_algorithm_version text, definition_digest text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION outbox.register_delivery_set(json, text) IS
    'Validate and insert-or-compare a DeliverySetDefinition@1 (SPEC R-DS-1..4). Raises OB101, OB102. Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION outbox.register_delivery_set(json, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_delivery_set(json, text) TO outbox_registrar;
