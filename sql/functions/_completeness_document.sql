-- outbox._completeness_document(p_filter text)
--   RETURNS TABLE (document text, manifest_sha256 text, status text, member_count bigint)
-- (private helper, SPEC R-OP-2) Builds the CompletenessProofManifest@1 document of the canonical
-- source filter p_filter (outbox._completeness_filter) from the current state, as RFC 8785
-- canonical text, and its jcs-sha256-v1. Deterministic: the same state and filter give the same
-- text (no time, no transaction id, no position inside it). It carries:
--   * members: the exact member set, one {deliverySet quartet, eventEnvelopeSha256, eventId,
--     eventType, schemaVersion} per source event in scope (hot and archived: location is not
--     part of identity), ordered by eventId; memberSetSha256 = jcs-sha256-v1 of that array;
--     kindSets: per (eventType, schemaVersion) count and set digest of its members;
--   * guards, each {count, evaluated, setSha256} over its exact entries ("eventId/destination",
--     sorted): nonTerminalDeliveries (mandatory pending|leased), receiptAntiJoin (deliveries to
--     a projection target without an acknowledged, verified receipt), openRevisionGaps (waiting
--     with awaiting_revision), openQuarantine (quarantined deliveries), unsupportedSchemas
--     (quarantined as unsupported_schema|unknown_event_type), archiveIntegrity (rows of the
--     retention hook outbox.archive_integrity_problems over the archived members' created_at
--     range; not evaluated -> status unknown when the hook fails);
--   * status: complete_for_supported_scope iff every guard is evaluated and 0;
--     unknown when a guard could not be evaluated; else partial_source_gap.
-- The filter {"sourceKind":"observation"} is the accepted observations' own proof
--   (intake._observation_completeness_document, R-OB-4).
-- Everything but the archive guard is read by ONE statement (one snapshot even under READ
-- COMMITTED); take_completeness_snapshot additionally requires REPEATABLE READ.
-- Memory: work_mem 128MB for this call (the member texts are aggregated in memory: about
--   400 bytes per member; measured 30 % faster than spilling at the default 4MB).
-- Locking: none (plain reads). Caller: take_completeness_snapshot, check_completeness; nobody else.
CREATE FUNCTION outbox._completeness_document(p_filter text)
RETURNS TABLE (document text, manifest_sha256 text, status text, member_count bigint)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET work_mem = '128MB'
AS $fn$
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
BEGIN
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
    ), d AS MATERIALIZED (
        SELECT od.event_id, od.destination, od.status, od.last_error_code,
               od.required_projection_name IS NOT NULL AS proj, od.mandatory
          FROM mt JOIN outbox.outbox_deliveries AS od ON od.event_id = mt.event_id
         WHERE NOT mt.archived AND (v_dests IS NULL OR od.destination = ANY (v_dests))
        UNION ALL
        SELECT ad.event_id, ad.destination, ad.status, ad.row_image ->> 'last_error_code',
               (ad.row_image ->> 'required_projection_name') IS NOT NULL,
               coalesce((ad.row_image ->> 'mandatory')::boolean, true)
          FROM mt JOIN outbox.archived_deliveries AS ad ON ad.event_id = mt.event_id
         WHERE mt.archived AND (v_dests IS NULL OR ad.destination = ANY (v_dests))
    ), g AS (
        SELECT 'nonTerminalDeliveries' AS guard, d.event_id::text || '/' || d.destination AS entry
          FROM d WHERE d.mandatory AND d.status IN ('pending', 'leased')
        UNION ALL
        SELECT 'receiptAntiJoin', d.event_id::text || '/' || d.destination
          FROM d WHERE d.proj AND d.status <> 'acknowledged'
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
           (SELECT pg_catalog.max(mt.created_at) FROM mt WHERE mt.archived)
      INTO v_count, v_members, v_kinds, v_guards, v_nonzero, v_amin, v_amax;

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
          || '],"manifestSchemaVersion":1,"manifestType":"CompletenessProofManifest","memberCount":' || v_count
          || ',"memberSetSha256":"' || outbox._sha256_hex('[' || v_members || ']')
          || '","members":[' || v_members
          || '],"parts":[{"part":"producer","receiptEvidence":"acknowledged_deliveries"}],"sourceFilter":' || p_filter
          || ',"sourceFilterSha256":"' || outbox._sha256_hex(p_filter)
          || '","status":"' || v_status || '"}';
    RETURN QUERY SELECT v_doc, outbox._sha256_hex(v_doc), v_status, v_count;
END
$fn$;
COMMENT ON FUNCTION outbox._completeness_document(text) IS
    'Private: the CompletenessProofManifest@1 canonical text of a source filter over the current state, its jcs-sha256-v1, status and member count (SPEC R-OP-2).';
REVOKE ALL ON FUNCTION outbox._completeness_document(text) FROM PUBLIC;
