-- append_event, immutability and the deferred delivery-set anti-join (SPEC §3.2, R-SEC-3).
SET LOCAL ROLE outbox_owner;

-- Kernel settings that callers must not be able to change for themselves (a GUC could be set by
-- any session). Owner-only; read by the functions.
CREATE TABLE outbox.kernel_settings (
    name        text PRIMARY KEY CHECK (name IN ('max_payload_bytes')),
    value       bigint NOT NULL CHECK (value > 0),
    description text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO outbox.kernel_settings (name, value, description) VALUES
    ('max_payload_bytes', 1048576, 'largest accepted append_event document, in bytes of its JSON text');

-- outbox._envelope_fail(detail): raise OB105 (envelope invalid). Private helper; granted to nobody.
CREATE FUNCTION outbox._envelope_fail(p_detail text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'envelope invalid' USING ERRCODE = 'OB105', DETAIL = p_detail;
END
$fn$;
REVOKE ALL ON FUNCTION outbox._envelope_fail(text) FROM PUBLIC;

-- outbox._event_envelope(e outbox.outbox_events) -> jsonb
-- The EventEnvelope@1 object (SPEC D-3) rebuilt from an event's stored columns: the object the
-- event digest covers. Absent optional fields are omitted, never null; occurredAt is UTC RFC 3339
-- with exactly six fractional digits and Z. Private helper; granted to nobody. No SET search_path
-- on purpose, so the planner can inline it into the claim query: every name is schema-qualified
-- (pg_catalog operators resolve first under any search_path).
CREATE FUNCTION outbox._event_envelope(e outbox.outbox_events) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $fn$
    SELECT pg_catalog.jsonb_build_object(
               'eventId', e.event_id::text,
               'eventType', e.event_type,
               'eventSchemaVersion', e.schema_version,
               'aggregateId', e.aggregate_id,
               'aggregateRevision', e.aggregate_revision,
               'tenant', pg_catalog.jsonb_build_object('tenantKind', e.tenant_kind, 'tenantId', e.tenant_id,
                                                       'workspaceId', e.workspace_id)
                         || CASE WHEN e.project_id IS NULL THEN '{}'::jsonb
                                 ELSE pg_catalog.jsonb_build_object('projectId', e.project_id) END,
               'occurredAt', pg_catalog.to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
               'payload', e.event_payload)
           || CASE WHEN e.correlation_id IS NULL THEN '{}'::jsonb
                   ELSE pg_catalog.jsonb_build_object('correlationId', e.correlation_id) END
           || CASE WHEN e.causation_id IS NULL THEN '{}'::jsonb
                   ELSE pg_catalog.jsonb_build_object('causationId', e.causation_id) END
           || CASE WHEN e.operation_id IS NULL THEN '{}'::jsonb
                   ELSE pg_catalog.jsonb_build_object('operationId', e.operation_id) END
$fn$;
REVOKE ALL ON FUNCTION outbox._event_envelope(outbox.outbox_events) FROM PUBLIC;

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

-- Deferred anti-join (SPEC R-AP-5): at COMMIT, every event appended in the transaction has
-- exactly one delivery per mandatory member of its frozen delivery set, each carrying the
-- member's frozen consumer, receipt and projection target: no missing and no extra rows.
-- A violation raises OB104 and aborts the whole business transaction. The trigger functions are
-- SECURITY DEFINER: deferred triggers fire at COMMIT as the committing role (e.g. a producer),
-- which has no access to the tables being compared.
CREATE FUNCTION outbox._check_event_delivery_set(p_event_id uuid) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_missing integer;
    v_extra   integer;
BEGIN
    WITH m AS (
        SELECT mm.destination, mm.consumer_name, mm.expected_receipt_type, mm.expected_receipt_schema_version,
               mm.projection_name, mm.projection_version
        FROM outbox.outbox_events e
        JOIN outbox.delivery_set_members mm
          ON mm.delivery_set_version = e.delivery_set_version
         AND mm.definition_digest = e.delivery_set_definition_digest
         AND mm.event_type = e.event_type AND mm.event_schema_version = e.schema_version AND mm.mandatory
        WHERE e.event_id = p_event_id
    ), d AS (
        SELECT dd.destination, dd.consumer_name, dd.expected_receipt_type, dd.expected_receipt_schema_version,
               dd.required_projection_name, dd.required_projection_version
        FROM outbox.outbox_deliveries dd
        JOIN outbox.outbox_events e ON e.event_id = dd.event_id AND e.delivery_set_version = dd.delivery_set_version
        WHERE dd.event_id = p_event_id AND dd.mandatory
    )
    SELECT (SELECT count(*) FROM (SELECT * FROM m EXCEPT ALL SELECT * FROM d) x),
           (SELECT count(*) FROM (SELECT * FROM d EXCEPT ALL SELECT * FROM m) y)
           + (SELECT count(*) FROM outbox.outbox_deliveries dd
              WHERE dd.event_id = p_event_id
                AND (NOT dd.mandatory OR dd.delivery_set_version IS DISTINCT FROM
                     (SELECT e.delivery_set_version FROM outbox.outbox_events e WHERE e.event_id = p_event_id)))
    INTO v_missing, v_extra;
    IF v_missing > 0 OR v_extra > 0 OR NOT EXISTS (SELECT 1 FROM outbox.outbox_events e WHERE e.event_id = p_event_id) THEN
        RAISE EXCEPTION 'delivery set of event incomplete or with extra rows at commit'
            USING ERRCODE = 'OB104',
                  DETAIL = format('event %s: %s missing, %s extra delivery rows', p_event_id, v_missing, v_extra);
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION outbox._check_event_delivery_set(uuid) FROM PUBLIC;

CREATE FUNCTION outbox.tg_outbox_events__delivery_set_complete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM outbox._check_event_delivery_set(NEW.event_id);
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_events__delivery_set_complete() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER tg_outbox_events__delivery_set_complete
    AFTER INSERT ON outbox.outbox_events
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_events__delivery_set_complete();

-- A delivery inserted for an event of an earlier transaction (the event's own check already
-- ran) is checked against its event's set at COMMIT too. For deliveries of events appended in
-- the same transaction the event's trigger does the work.
CREATE FUNCTION outbox.tg_outbox_deliveries__delivery_set_member() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox.outbox_events e
                   WHERE e.event_id = NEW.event_id AND e.xmin::text = pg_catalog.pg_current_xact_id()::xid::text) THEN
        PERFORM outbox._check_event_delivery_set(NEW.event_id);
    END IF;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_deliveries__delivery_set_member() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER tg_outbox_deliveries__delivery_set_member
    AFTER INSERT ON outbox.outbox_deliveries
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_deliveries__delivery_set_member();


-- Grants (SPEC R-SEC-1): producers act only through append_event; the auditor reads.
GRANT SELECT ON outbox.outbox_events, outbox.outbox_deliveries, outbox.kernel_settings TO outbox_auditor;

RESET ROLE;
