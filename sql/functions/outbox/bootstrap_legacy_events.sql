-- outbox.bootstrap_legacy_events(source regclass, delivery_set_version int,
--     definition_schema_version int, digest_algorithm_version text, definition_digest text,
--     max_rows int DEFAULT 10000)
--   RETURNS TABLE (run_id uuid, imported int, quarantined int, already_present int, evidence_sha256 text)
--   (public, SPEC R-BS-1..4)
-- Purpose: adopt the events of an outbox that existed before the kernel: each not yet handled row
--   of the DBA-named source (envelope fields in snake_case), in event-id order, becomes imported,
--   already_present or quarantined under an explicit registered Bootstrap Delivery Set; resumable
--   and idempotent, with one immutable evidence row per run.
-- Locking: LOCK outbox.outbox_events IN SHARE ROW EXCLUSIVE MODE until commit (appends wait).
-- SQLSTATEs: 22023 source NULL or max_rows outside 1..1000000; 42703 the source lacks a column;
--   OB103 the quartet is not a registered delivery-set definition.
-- Design notes (columns, classifications, evidence): docs/migrations.md#outboxbootstrap_legacy_events
-- Caller: outbox_owner (a migration or a DBA; outbox_owner needs SELECT on the source).
CREATE OR REPLACE FUNCTION outbox.bootstrap_legacy_events(p_source regclass, p_delivery_set_version integer, p_definition_schema_version integer, p_digest_algorithm_version text, p_definition_digest text, p_max_rows integer DEFAULT 10000)
 RETURNS TABLE(run_id uuid, imported integer, quarantined integer, already_present integer, evidence_sha256 text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    c_columns  constant text[] := ARRAY['event_id', 'event_type', 'event_schema_version', 'aggregate_id',
                                        'aggregate_revision', 'tenant_kind', 'tenant_id', 'workspace_id', 'project_id',
                                        'correlation_id', 'causation_id', 'operation_id', 'payload', 'occurred_at',
                                        'created_at'];
    v_run       uuid := pg_catalog.gen_random_uuid();
    v_source    text;
    v_missing   text;
    v_max_bytes bigint;
    v_pending   integer;
    v_imported  integer;
    v_present   integer;
    v_quar      integer;
    v_before    integer;
    v_reasons   jsonb;
    v_evidence  text;
BEGIN
    IF p_source IS NULL THEN
        RAISE EXCEPTION 'bootstrap_legacy_events: source is NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'bootstrap_legacy_events: max_rows must be between 1 and 1000000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_source := p_source::text;
    IF NOT EXISTS (SELECT 1 FROM outbox.delivery_set_versions v
                    WHERE v.delivery_set_version = p_delivery_set_version
                      AND v.definition_schema_version = p_definition_schema_version
                      AND v.digest_algorithm_version = p_digest_algorithm_version
                      AND v.definition_digest = p_definition_digest) THEN
        RAISE EXCEPTION 'bootstrap delivery set is not a registered definition'
            USING ERRCODE = 'OB103',
                  DETAIL = pg_catalog.format('no registered delivery set (%s, %s, %s, %s)', p_delivery_set_version,
                                             p_definition_schema_version, p_digest_algorithm_version, p_definition_digest),
                  HINT = 'register the Bootstrap Delivery Set first (outboxctl release register FILE bootstrap-...)';
    END IF;
    SELECT pg_catalog.string_agg(c.col, ', ' ORDER BY c.ord) INTO v_missing
      FROM pg_catalog.unnest(c_columns) WITH ORDINALITY AS c(col, ord)
     WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                        WHERE a.attrelid = p_source AND a.attname = c.col AND a.attnum > 0 AND NOT a.attisdropped);
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'bootstrap source % lacks columns: %', v_source, v_missing USING ERRCODE = 'undefined_column';
    END IF;

    -- The append lock (R-BS-4): appends and other bootstraps wait until the caller commits.
    LOCK TABLE outbox.outbox_events IN SHARE ROW EXCLUSIVE MODE;
    SELECT k.value INTO v_max_bytes FROM outbox.kernel_settings k WHERE k.name = 'max_payload_bytes';
    SELECT pg_catalog.count(*) INTO v_before FROM outbox.bootstrap_items i
     WHERE i.source = v_source AND i.classification IN ('imported', 'already_present');

    -- The rows left (not handled by an earlier run), up to max_rows item keys in key order.
    IF pg_catalog.to_regclass('pg_temp._bootstrap_todo') IS NOT NULL THEN
        DROP TABLE pg_temp._bootstrap_todo; -- a second run in the same transaction
    END IF;
    EXECUTE pg_catalog.format($q$
        CREATE TEMP TABLE _bootstrap_todo ON COMMIT DROP AS
        WITH src AS (
            SELECT s.event_id::text AS event_id, s.event_type::text AS event_type,
                   s.event_schema_version::text AS event_schema_version, s.aggregate_id::text AS aggregate_id,
                   s.aggregate_revision::text AS aggregate_revision, s.tenant_kind::text AS tenant_kind,
                   s.tenant_id::text AS tenant_id, s.workspace_id::text AS workspace_id, s.project_id::text AS project_id,
                   s.correlation_id::text AS correlation_id, s.causation_id::text AS causation_id,
                   s.operation_id::text AS operation_id, s.payload::text AS payload,
                   s.occurred_at::timestamptz AS occurred_at, s.created_at::timestamptz AS created_at,
                   pg_catalog.to_jsonb(s) AS legacy_row
              FROM %s AS s
        ), keyed AS (
            SELECT src.*,
                   CASE WHEN pg_catalog.lower(src.event_id) ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                        THEN pg_catalog.lower(src.event_id)
                        ELSE 'row:' || pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(src.legacy_row::text, 'UTF8')), 'hex') END AS item_key
              FROM src
        ), left_rows AS (
            SELECT k.*, pg_catalog.dense_rank() OVER (ORDER BY k.item_key) AS key_rank,
                   pg_catalog.dense_rank() OVER (ORDER BY k.item_key)
                   + pg_catalog.dense_rank() OVER (ORDER BY k.item_key DESC) - 1 AS left_keys
              FROM keyed k
             WHERE NOT EXISTS (SELECT 1 FROM outbox.bootstrap_items i WHERE i.source = $1 AND i.item_key = k.item_key)
        )
        SELECT * FROM left_rows WHERE key_rank <= $2
    $q$, v_source) USING v_source, p_max_rows;

    WITH v AS MATERIALIZED (
        -- LATERAL: one call per row ((f(x)).* would call the function once per output column)
        SELECT t.item_key, t.legacy_row, t.created_at AS legacy_created_at, e.*
          FROM pg_temp._bootstrap_todo t
         CROSS JOIN LATERAL outbox._bootstrap_envelope(t.event_id, t.event_type, t.event_schema_version, t.aggregate_id,
                                           t.aggregate_revision, t.tenant_kind, t.tenant_id, t.workspace_id, t.project_id,
                                           t.correlation_id, t.causation_id, t.operation_id, t.payload, t.occurred_at,
                                           v_max_bytes) AS e
    ), g AS MATERIALIZED (
        SELECT v.*,
               pg_catalog.count(*) OVER w AS copies,
               pg_catalog.count(*) FILTER (WHERE v.reason IS NOT NULL) OVER w AS bad_copies,
               pg_catalog.min(v.event_envelope_sha256) OVER w AS min_sha256,
               pg_catalog.max(v.event_envelope_sha256) OVER w AS max_sha256,
               pg_catalog.row_number() OVER (PARTITION BY v.item_key ORDER BY v.reason NULLS FIRST, v.event_envelope_sha256) AS rn,
               (SELECT x.event_envelope_sha256 FROM outbox.outbox_events x WHERE x.event_id = v.event_id) AS hot_sha256,
               (SELECT x.event_envelope_sha256 FROM outbox.archived_events x WHERE x.event_id = v.event_id) AS archived_sha256,
               (SELECT pg_catalog.count(*) FROM outbox.delivery_set_members m
                 WHERE m.delivery_set_version = p_delivery_set_version AND m.definition_digest = p_definition_digest
                   AND m.event_type = v.event_type AND m.event_schema_version = v.schema_version AND m.mandatory) AS members
          FROM v
        WINDOW w AS (PARTITION BY v.item_key)
    ), c AS MATERIALIZED (
        SELECT g.*,
               CASE WHEN g.copies > 1 AND (g.bad_copies > 0 OR g.min_sha256 <> g.max_sha256) THEN 'digest_conflict'
                    WHEN g.reason IS NOT NULL THEN g.reason
                    WHEN coalesce(g.hot_sha256, g.archived_sha256) <> g.event_envelope_sha256 THEN 'digest_conflict'
                    WHEN coalesce(g.hot_sha256, g.archived_sha256) IS NOT NULL THEN NULL
                    WHEN g.members = 0 THEN 'unsupported_schema'
               END AS quarantine_reason,
               CASE WHEN g.copies > 1 AND (g.bad_copies > 0 OR g.min_sha256 <> g.max_sha256)
                        THEN 'the source holds this event id more than once with different envelopes'
                    WHEN g.reason IS NOT NULL THEN g.detail
                    WHEN coalesce(g.hot_sha256, g.archived_sha256) <> g.event_envelope_sha256
                        THEN pg_catalog.format('event id present in the kernel (%s) with digest %s, legacy digest %s',
                                               CASE WHEN g.hot_sha256 IS NULL THEN 'archived' ELSE 'hot' END,
                                               coalesce(g.hot_sha256, g.archived_sha256), g.event_envelope_sha256)
                    WHEN g.members = 0
                        THEN pg_catalog.format('(%s, %s) has no mandatory member in delivery set version %s',
                                               g.event_type, g.schema_version, p_delivery_set_version)
               END AS quarantine_detail
          FROM g WHERE g.rn = 1
    ), new_events AS (
        INSERT INTO outbox.outbox_events
            (event_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
             delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
             aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id,
             correlation_id, causation_id, operation_id, event_payload,
             event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, created_at,
             event_envelope_canonical)
        SELECT c.event_id, c.event_type, c.schema_version, p_delivery_set_version, p_definition_schema_version,
               p_digest_algorithm_version, p_definition_digest,
               c.aggregate_id, c.aggregate_revision, c.tenant_kind, c.tenant_id, c.workspace_id, c.project_id,
               c.correlation_id, c.causation_id, c.operation_id, c.event_payload,
               'jcs-sha256-v1', c.event_envelope_sha256, c.occurred_at, coalesce(c.legacy_created_at, c.occurred_at),
               c.event_envelope_canonical
          FROM c
         WHERE c.quarantine_reason IS NULL AND c.hot_sha256 IS NULL AND c.archived_sha256 IS NULL
        RETURNING outbox_events.event_id, outbox_events.event_type, outbox_events.schema_version,
                  outbox_events.aggregate_id, outbox_events.aggregate_revision
    ), new_deliveries AS (
        INSERT INTO outbox.outbox_deliveries
            (destination, event_id, delivery_set_version, consumer_name, expected_receipt_type,
             expected_receipt_schema_version, required_projection_name, required_projection_version,
             mandatory, aggregate_id, aggregate_revision)
        SELECT m.destination, n.event_id, m.delivery_set_version, m.consumer_name, m.expected_receipt_type,
               m.expected_receipt_schema_version, m.projection_name, m.projection_version,
               true, n.aggregate_id, n.aggregate_revision
          FROM new_events n
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = p_delivery_set_version AND m.definition_digest = p_definition_digest
           AND m.event_type = n.event_type AND m.event_schema_version = n.schema_version AND m.mandatory
        RETURNING outbox_deliveries.destination
    ), items AS (
        INSERT INTO outbox.bootstrap_items
            (source, item_key, run_id, event_id, classification, reason, detail, event_envelope_sha256,
             delivery_set_version, legacy_row)
        SELECT v_source, c.item_key, v_run, c.event_id,
               CASE WHEN c.quarantine_reason IS NOT NULL THEN 'quarantined'
                    WHEN c.hot_sha256 IS NOT NULL OR c.archived_sha256 IS NOT NULL THEN 'already_present'
                    ELSE 'imported' END,
               c.quarantine_reason, c.quarantine_detail,
               CASE WHEN c.quarantine_reason IS NULL THEN c.event_envelope_sha256 END,
               p_delivery_set_version,
               CASE WHEN c.quarantine_reason IS NOT NULL THEN c.legacy_row END
          FROM c
        RETURNING bootstrap_items.classification, bootstrap_items.reason
    ), notified AS (
        SELECT pg_catalog.count(pg_catalog.pg_notify('outbox_delivery', n.destination)) AS destinations
          FROM (SELECT DISTINCT d.destination FROM new_deliveries d) AS n
    )
    SELECT pg_catalog.count(*) FILTER (WHERE i.classification = 'imported'),
           pg_catalog.count(*) FILTER (WHERE i.classification = 'already_present'),
           pg_catalog.count(*) FILTER (WHERE i.classification = 'quarantined'),
           coalesce((SELECT pg_catalog.jsonb_object_agg(r.reason, r.n)
                                  FROM (SELECT i2.reason, pg_catalog.count(*) AS n FROM items i2
                                         WHERE i2.reason IS NOT NULL GROUP BY i2.reason) r), '{}'::jsonb)
      INTO v_imported, v_present, v_quar, v_reasons
      FROM items i CROSS JOIN notified;

    SELECT coalesce(pg_catalog.max(t.left_keys), 0)::integer - (v_imported + v_present + v_quar)
      INTO v_pending FROM pg_temp._bootstrap_todo t;
    DROP TABLE pg_temp._bootstrap_todo;

    SELECT outbox._sha256_hex(coalesce(pg_catalog.string_agg(
               i.event_id::text || ' ' || i.event_envelope_sha256 || E'\n', '' ORDER BY i.event_id), ''))
      INTO v_evidence
      FROM outbox.bootstrap_items i
     WHERE i.source = v_source AND i.classification IN ('imported', 'already_present');

    INSERT INTO outbox.bootstrap_runs
        (run_id, source, delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest,
         max_rows, run_by, started_at, finished_at, imported, already_present, quarantined, quarantine_reasons,
         present_before, rows_left, evidence_sha256)
    VALUES (v_run, v_source, p_delivery_set_version, p_definition_schema_version, p_digest_algorithm_version,
            p_definition_digest, p_max_rows, session_user, pg_catalog.now(), pg_catalog.clock_timestamp(),
            v_imported, v_present, v_quar, v_reasons, v_before, greatest(v_pending, 0), v_evidence);

    RETURN QUERY SELECT v_run, v_imported, v_quar, v_before + v_present, v_evidence;
END
$function$;

COMMENT ON FUNCTION outbox.bootstrap_legacy_events(regclass, integer, integer, text, text, integer) IS
    'Bootstrap: import a DBA-named legacy event table under an append lock against a registered Bootstrap Delivery Set; resumable, idempotent, one evidence row per run (SPEC R-BS-1..4). Caller: outbox_owner.';

REVOKE ALL ON FUNCTION outbox.bootstrap_legacy_events(regclass, integer, integer, text, text, integer) FROM PUBLIC;
