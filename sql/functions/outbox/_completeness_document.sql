-- outbox._completeness_document(p_filter text, p_manifest_version integer DEFAULT 2)
--   RETURNS TABLE (document text, manifest_sha256 text, status text, member_count bigint)
-- (private helper, SPEC R-OP-2, R-PV-3) The CompletenessProofManifest@2 (or @1, to re-check a
-- proof taken before migration 037) RFC 8785 text of the canonical source filter p_filter over
-- the current state, and its jcs-sha256-v1. Deterministic: no time, transaction id or position.
-- Members (exact set, per-kind set digests) and guards ({count, evaluated, setSha256} over the
-- sorted "eventId/destination" entries) are described in docs/read-model.md. receiptAntiJoin:
-- @1 = projection deliveries not acknowledged; @2 = against the ACTIVE version of each
-- projection (outbox.projection_versions): a delivery to the active version must be
-- acknowledged, a delivery to another (former) version needs an inbox receipt of the active
-- version; @2 records the versions in "projectionVersions". Scope {"sourceKind":"observation"}
-- is intake._observation_completeness_document (@1, R-OB-4). One statement reads everything
-- but the archive guard. work_mem 128MB: member texts aggregate in memory (~400 B/member).
-- Locking: none. Callers: take_completeness_snapshot, check_completeness.
CREATE OR REPLACE FUNCTION outbox._completeness_document(p_filter text, p_manifest_version integer DEFAULT 2)
 RETURNS TABLE(document text, manifest_sha256 text, status text, member_count bigint)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET work_mem TO '128MB'
AS $function$
DECLARE
    v_f       jsonb := p_filter::jsonb;
    v_types   text[];
    v_dests   text[];
    v_count   bigint;
    v_members text;
    v_kinds   text;
    v_guards  text;
    v_nonzero boolean;
    v_amin    timestamptz;
    v_amax    timestamptz;
    v_archive text;
    v_an      bigint;
    v_as      text;
    v_status  text;
    v_doc     text;
    v_pvs     text;
BEGIN
    IF p_manifest_version IS NULL OR p_manifest_version NOT IN (1, 2) THEN
        RAISE EXCEPTION 'unknown CompletenessProofManifest version %', p_manifest_version USING ERRCODE = '22023';
    END IF;
    IF v_f ->> 'sourceKind' = 'observation' THEN
        RETURN QUERY SELECT * FROM intake._observation_completeness_document(p_filter);
        RETURN;
    END IF;
    IF v_f ? 'eventTypes' THEN
        SELECT pg_catalog.array_agg(x) INTO v_types FROM pg_catalog.jsonb_array_elements_text(v_f -> 'eventTypes') AS x;
    END IF;
    IF v_f ? 'destinations' THEN
        SELECT pg_catalog.array_agg(x) INTO v_dests FROM pg_catalog.jsonb_array_elements_text(v_f -> 'destinations') AS x;
    END IF;

    WITH m AS MATERIALIZED (
        SELECT e.event_id, e.event_type, e.schema_version, e.delivery_set_version AS dv,
               e.delivery_set_definition_schema_version AS ds,
               e.delivery_set_definition_digest_algorithm_version AS da,
               e.delivery_set_definition_digest AS dd, e.event_envelope_sha256 AS sha,
               false AS archived, e.created_at
          FROM outbox.outbox_events AS e
         WHERE (v_types IS NULL OR e.event_type = ANY (v_types))
           AND (v_dests IS NULL OR EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                                            WHERE d.event_id = e.event_id AND d.destination = ANY (v_dests)))
        UNION ALL
        SELECT a.event_id, a.event_type, a.schema_version, a.delivery_set_version,
               a.delivery_set_definition_schema_version, a.delivery_set_definition_digest_algorithm_version,
               a.delivery_set_definition_digest, a.event_envelope_sha256, true, a.created_at
          FROM outbox.archived_events AS a
         WHERE (v_types IS NULL OR a.event_type = ANY (v_types))
           AND (v_dests IS NULL OR EXISTS (SELECT 1 FROM outbox.archived_deliveries AS d
                                            WHERE d.event_id = a.event_id AND d.destination = ANY (v_dests)))
    ), mt AS MATERIALIZED (
        SELECT m.event_id, m.event_type, m.schema_version, m.archived, m.created_at,
               pg_catalog.format('{"deliverySet":{"definitionDigest":%s,"definitionSchemaVersion":%s,"digestAlgorithmVersion":%s,"version":%s},"eventEnvelopeSha256":%s,"eventId":"%s","eventType":%s,"schemaVersion":%s}',
                   pg_catalog.to_json(m.dd), m.ds, pg_catalog.to_json(m.da), m.dv,
                   pg_catalog.to_json(m.sha), m.event_id, pg_catalog.to_json(m.event_type),
                   pg_catalog.to_json(m.schema_version)) AS j
          FROM m
    ), d0 AS (
        SELECT od.event_id, od.destination, od.status, od.last_error_code,
               od.required_projection_name AS pname, od.required_projection_version AS pver,
               od.consumer_name AS cname, od.mandatory
          FROM mt JOIN outbox.outbox_deliveries AS od ON od.event_id = mt.event_id
         WHERE NOT mt.archived AND (v_dests IS NULL OR od.destination = ANY (v_dests))
        UNION ALL
        SELECT ad.event_id, ad.destination, ad.status, ad.row_image ->> 'last_error_code',
               ad.row_image ->> 'required_projection_name',
               (ad.row_image ->> 'required_projection_version')::integer,
               ad.row_image ->> 'consumer_name',
               coalesce((ad.row_image ->> 'mandatory')::boolean, true)
          FROM mt JOIN outbox.archived_deliveries AS ad ON ad.event_id = mt.event_id
         WHERE mt.archived AND (v_dests IS NULL OR ad.destination = ANY (v_dests))
    ), d AS MATERIALIZED (
        -- act: the projection's active version (R-PV-2); an unregistered projection keeps the
        -- delivery's own target.
        SELECT d0.*, d0.pname IS NOT NULL AS proj,
               coalesce(av.projection_version, d0.pver) AS act
          FROM d0 LEFT JOIN outbox.projection_versions AS av
            ON av.projection_name = d0.pname AND av.state = 'active'
    ), g AS (
        SELECT 'nonTerminalDeliveries' AS guard, d.event_id::text || '/' || d.destination AS entry
          FROM d WHERE d.mandatory AND d.status IN ('pending', 'leased')
        UNION ALL
        SELECT 'receiptAntiJoin', d.event_id::text || '/' || d.destination
          FROM d
         WHERE d.proj
           AND CASE WHEN p_manifest_version = 1 OR d.pver = d.act THEN d.status <> 'acknowledged'
                    ELSE NOT EXISTS (SELECT 1 FROM inbox.inbox_receipts AS r
                                      WHERE r.consumer_name = d.cname AND r.projection_name = d.pname
                                        AND r.projection_version = d.act AND r.event_id = d.event_id) END
        UNION ALL
        SELECT 'openRevisionGaps', d.event_id::text || '/' || d.destination
          FROM d WHERE d.status IN ('pending', 'leased') AND d.last_error_code = 'awaiting_revision'
        UNION ALL
        SELECT 'openQuarantine', d.event_id::text || '/' || d.destination
          FROM d WHERE d.status = 'quarantined'
        UNION ALL
        SELECT 'unsupportedSchemas', d.event_id::text || '/' || d.destination
          FROM d WHERE d.status = 'quarantined' AND d.last_error_code IN ('unsupported_schema', 'unknown_event_type')
    ), gs AS (
        SELECT g.guard, pg_catalog.count(*) AS n,
               pg_catalog.string_agg(pg_catalog.to_json(g.entry)::text, ',' ORDER BY g.entry COLLATE "C") AS s
          FROM g GROUP BY g.guard
    )
    SELECT (SELECT pg_catalog.count(*) FROM mt),
           (SELECT coalesce(pg_catalog.string_agg(mt.j, ',' ORDER BY mt.event_id), '') FROM mt),
           (SELECT coalesce(pg_catalog.string_agg(
                       pg_catalog.format('{"count":%s,"eventType":%s,"schemaVersion":%s,"setSha256":"%s"}',
                           k.n, pg_catalog.to_json(k.event_type), pg_catalog.to_json(k.schema_version),
                           outbox._sha256_hex('[' || k.s || ']')),
                       ',' ORDER BY k.event_type COLLATE "C", k.schema_version COLLATE "C"), '')
              FROM (SELECT mt.event_type, mt.schema_version, pg_catalog.count(*) AS n,
                           pg_catalog.string_agg(mt.j, ',' ORDER BY mt.event_id) AS s
                      FROM mt GROUP BY mt.event_type, mt.schema_version) AS k),
           (SELECT pg_catalog.string_agg(
                       pg_catalog.format('"%s":{"count":%s,"evaluated":true,"setSha256":"%s"}',
                           v.gn, coalesce(gs.n, 0), outbox._sha256_hex('[' || coalesce(gs.s, '') || ']')),
                       ',' ORDER BY v.gn COLLATE "C")
              FROM (VALUES ('nonTerminalDeliveries'), ('openQuarantine'), ('openRevisionGaps'),
                           ('receiptAntiJoin'), ('unsupportedSchemas')) AS v(gn)
              LEFT JOIN gs ON gs.guard = v.gn),
           (SELECT coalesce(pg_catalog.sum(gs.n), 0) > 0 FROM gs),
           (SELECT pg_catalog.min(mt.created_at) FROM mt WHERE mt.archived),
           (SELECT pg_catalog.max(mt.created_at) FROM mt WHERE mt.archived),
           (SELECT coalesce(pg_catalog.string_agg(
                       pg_catalog.format('{"activeVersion":%s,"projectionName":%s}', p.act, pg_catalog.to_json(p.pname)),
                       ',' ORDER BY p.pname COLLATE "C", p.act), '')
              FROM (SELECT DISTINCT d.pname, d.act FROM d WHERE d.proj) AS p)
      INTO v_count, v_members, v_kinds, v_guards, v_nonzero, v_amin, v_amax, v_pvs;

    -- The retention hook (docs/retention.md): archived members may count as complete only
    -- when the archive runs covering them verify. A failing hook leaves the guard unevaluated.
    IF v_amin IS NULL THEN
        v_an := 0;
        v_as := '';
    ELSE
        BEGIN
            SELECT pg_catalog.count(*),
                   coalesce(pg_catalog.string_agg(pg_catalog.to_json(x.entry)::text, ',' ORDER BY x.entry COLLATE "C"), '')
              INTO v_an, v_as
              FROM (SELECT p.run_id::text || '/' || p.problem AS entry
                      FROM outbox.archive_integrity_problems(v_amin, v_amax + interval '1 microsecond') AS p) AS x;
        EXCEPTION WHEN OTHERS THEN
            v_an := NULL;
        END;
    END IF;
    IF v_an IS NULL THEN
        v_archive := '"archiveIntegrity":{"count":null,"evaluated":false,"setSha256":null}';
        v_status := 'unknown';
    ELSE
        v_archive := pg_catalog.format('"archiveIntegrity":{"count":%s,"evaluated":true,"setSha256":"%s"}',
                                       v_an, outbox._sha256_hex('[' || v_as || ']'));
        v_status := CASE WHEN v_nonzero OR v_an > 0 THEN 'partial_source_gap' ELSE 'complete_for_supported_scope' END;
    END IF;

    v_doc := '{"digestAlgorithmVersion":"jcs-sha256-v1","guards":{' || v_archive || ',' || v_guards
          || '},"kindSets":[' || v_kinds
          || '],"manifestSchemaVersion":' || p_manifest_version
          || ',"manifestType":"CompletenessProofManifest","memberCount":' || v_count
          || ',"memberSetSha256":"' || outbox._sha256_hex('[' || v_members || ']')
          || '","members":[' || v_members
          || CASE WHEN p_manifest_version = 1
                  THEN '],"parts":[{"part":"producer","receiptEvidence":"acknowledged_deliveries"}]'
                  ELSE '],"parts":[{"part":"producer","receiptEvidence":"active_version_receipts"}],"projectionVersions":['
                       || v_pvs || ']' END
          || ',"sourceFilter":' || p_filter
          || ',"sourceFilterSha256":"' || outbox._sha256_hex(p_filter)
          || '","status":"' || v_status || '"}';
    RETURN QUERY SELECT v_doc, outbox._sha256_hex(v_doc), v_status, v_count;
END
$function$;

COMMENT ON FUNCTION outbox._completeness_document(text, integer) IS
    'Private: the CompletenessProofManifest@2 (or @1) canonical text of a source filter over the current state, its jcs-sha256-v1, status and member count (SPEC R-OP-2).';

REVOKE ALL ON FUNCTION outbox._completeness_document(text, integer) FROM PUBLIC;
