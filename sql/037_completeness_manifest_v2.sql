-- CompletenessProofManifest@2 and a search that follows the active projection version
-- (issue 24 item 5; SPEC R-OP-2, R-OP-3, R-PV-2, R-PV-3):
--   * outbox._completeness_document gains p_manifest_version (default 2): the receipt anti-join of
--     @2 is taken against each projection's active version (a delivery to the active version must
--     be acknowledged; one frozen to a former version needs an inbox receipt of the active one)
--     and the document records those versions ("projectionVersions"); @1 is still derived, so
--     proofs taken before this migration stay verifiable;
--   * take_completeness_snapshot writes @2; check_completeness re-derives a stored proof in its
--     own version;
--   * search_exact_id matches only the active version's exact-id index rows and checks the
--     source gap against that version.
-- Nothing is backfilled; stored manifests are immutable and keep their version.
SET LOCAL ROLE outbox_owner;

DROP FUNCTION outbox.check_completeness(uuid);
DROP FUNCTION outbox.take_completeness_snapshot(json);
DROP FUNCTION outbox._completeness_document(text);
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
CREATE FUNCTION outbox._completeness_document(p_filter text, p_manifest_version integer DEFAULT 2)
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
$fn$;
COMMENT ON FUNCTION outbox._completeness_document(text, integer) IS
    'Private: the CompletenessProofManifest@2 (or @1) canonical text of a source filter over the current state, its jcs-sha256-v1, status and member count (SPEC R-OP-2).';
REVOKE ALL ON FUNCTION outbox._completeness_document(text, integer) FROM PUBLIC;

-- outbox.take_completeness_snapshot(scope json)
--   RETURNS TABLE (manifest_id uuid, manifest_sha256 text, status text)
-- Purpose (SPEC R-OP-2): a completeness proof of the producer's database. Builds the
--   CompletenessProofManifest@2 of the scope (outbox._completeness_document: exact member set
--   with per-kind set digests and every guard) from the caller's REPEATABLE READ snapshot and
--   stores it immutably (outbox.completeness_manifests, OB202 on change) under a new
--   manifest_id. Receipt evidence: a delivery to the projection's active version is acknowledged
--   (verified ack receipt), a delivery to a former version has a receipt of the active one;
--   where the projector's inbox is another database, the Go companion (internal/readmodel)
--   snapshots it as well and records that part beside this manifest.
--   scope: {} = every event; optional eventTypes: [..], destinations: [..] (exact literals).
-- Locking: none (reads, one insert). Isolation: must run in REPEATABLE READ or SERIALIZABLE so
--   every read of the proof sees one snapshot.
-- SQLSTATEs: OB501 not in REPEATABLE READ/SERIALIZABLE; 22023 malformed scope.
-- Caller: outbox_auditor.
CREATE FUNCTION outbox.take_completeness_snapshot(p_scope json)
RETURNS TABLE (manifest_id uuid, manifest_sha256 text, status text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_filter text;
    v_doc    record;
    v_id     uuid;
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') NOT IN ('repeatable read', 'serializable') THEN
        RAISE EXCEPTION 'a completeness snapshot requires REPEATABLE READ or SERIALIZABLE isolation'
            USING ERRCODE = 'OB501',
                  DETAIL = pg_catalog.format('the transaction runs in %s', pg_catalog.current_setting('transaction_isolation')),
                  HINT = 'BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM outbox.take_completeness_snapshot(''{}''); COMMIT;';
    END IF;
    v_filter := outbox._completeness_filter(p_scope);
    SELECT * INTO v_doc FROM outbox._completeness_document(v_filter);
    INSERT INTO outbox.completeness_manifests (manifest_sha256, source_filter, status, member_count, document)
    VALUES (v_doc.manifest_sha256, v_filter, v_doc.status, v_doc.member_count, v_doc.document)
    RETURNING completeness_manifests.manifest_id INTO v_id;
    RETURN QUERY SELECT v_id, v_doc.manifest_sha256, v_doc.status;
END
$fn$;
COMMENT ON FUNCTION outbox.take_completeness_snapshot(json) IS
    'Completeness proof (SPEC R-OP-2): stores the immutable, content-addressed CompletenessProofManifest@2 of the scope from one REPEATABLE READ snapshot; returns (manifest_id, manifest_sha256, status). OB501 outside REPEATABLE READ/SERIALIZABLE, 22023 malformed scope. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.take_completeness_snapshot(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.take_completeness_snapshot(json) TO outbox_auditor;

-- outbox.check_completeness(manifest_id uuid) RETURNS TABLE (freshness text, reason text)
-- Purpose (SPEC R-OP-2): re-checks a stored proof against the current state by rebuilding the
--   whole manifest document of its source filter and comparing digests - the exact member set
--   and every guard's exact entry set, never a count, position, max id or time:
--   verified_current (reason NULL) | stale (source_changed) | unverified (no_completed_snapshot:
--   unknown id; definition_mismatch: the stored document no longer hashes to its
--   manifest_sha256 or is of an unknown manifest/digest version; guard_unavailable: the proof or
--   the re-check could not evaluate a guard).
-- Locking: none. The member set and the delivery guards are read by one statement.
-- Manifest versions: @2 (migration 037: receipt anti-join against the active projection
--   versions) and @1 (proofs taken before it) are both re-derived in their own shape.
-- SQLSTATEs: none of its own. Caller: outbox_auditor.
CREATE FUNCTION outbox.check_completeness(p_manifest_id uuid)
RETURNS TABLE (freshness text, reason text)
LANGUAGE plpgsql
SECURITY DEFINER
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_m   outbox.completeness_manifests%ROWTYPE;
    v_now record;
    v_ver integer;
BEGIN
    SELECT * INTO v_m FROM outbox.completeness_manifests AS c WHERE c.manifest_id = p_manifest_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unverified'::text, 'no_completed_snapshot'::text;
        RETURN;
    END IF;
    IF outbox._sha256_hex(v_m.document) <> v_m.manifest_sha256 THEN
        RETURN QUERY SELECT 'unverified'::text, 'definition_mismatch'::text;
        RETURN;
    END IF;
    -- Version and scope checks on the text (the document can be tens of MB: never parsed here).
    v_ver := CASE WHEN pg_catalog.strpos(v_m.document, ',"manifestSchemaVersion":2,"manifestType":"CompletenessProofManifest",') > 0 THEN 2
                  WHEN pg_catalog.strpos(v_m.document, ',"manifestSchemaVersion":1,"manifestType":"CompletenessProofManifest",') > 0 THEN 1 END;
    IF pg_catalog.left(v_m.document, 42) <> '{"digestAlgorithmVersion":"jcs-sha256-v1",'
       OR v_ver IS NULL
       OR pg_catalog.strpos(v_m.document, ',"sourceFilter":' || v_m.source_filter || ',"sourceFilterSha256":') = 0 THEN
        RETURN QUERY SELECT 'unverified'::text, 'definition_mismatch'::text;
        RETURN;
    END IF;
    IF v_m.status = 'unknown' THEN
        RETURN QUERY SELECT 'unverified'::text, 'guard_unavailable'::text;
        RETURN;
    END IF;
    SELECT * INTO v_now FROM outbox._completeness_document(v_m.source_filter, v_ver);
    IF v_now.status = 'unknown' THEN
        RETURN QUERY SELECT 'unverified'::text, 'guard_unavailable'::text;
    ELSIF v_now.manifest_sha256 = v_m.manifest_sha256 THEN
        RETURN QUERY SELECT 'verified_current'::text, NULL::text;
    ELSE
        RETURN QUERY SELECT 'stale'::text, 'source_changed'::text;
    END IF;
END
$fn$;
COMMENT ON FUNCTION outbox.check_completeness(uuid) IS
    'Re-checks a completeness proof against the current state (SPEC R-OP-2): verified_current | stale (source_changed) | unverified (no_completed_snapshot, definition_mismatch, guard_unavailable), by rebuilding the exact member and guard sets. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.check_completeness(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.check_completeness(uuid) TO outbox_auditor;


DROP FUNCTION outbox.search_exact_id(text, text);
-- outbox.search_exact_id(kind text, id text)
--   RETURNS TABLE (result text, reason text, event_id uuid, operation_id text)
--   (public, SPEC R-OP-3, R-PV-2, R-OB-4)
-- Purpose: exact-identifier search, never a prefix or fuzzy match: eventId in the source events
--   (hot and archived), the other kinds in the exact-id index of each projection's ACTIVE version,
--   observationId in the intake's id registry. 'matched' per event; 'not_found' only under a
--   verified_current complete proof; else 'inconclusive' with the reason.
-- Cost: a no-match answer re-checks the proof: O(events in scope).
-- Locking: none. SQLSTATEs: 22023 unknown kind, empty/over-long id, eventId not a UUID.
-- Design notes (the answers and their reasons): docs/read-model.md#outboxsearch_exact_id
-- Caller: outbox_auditor.
CREATE FUNCTION outbox.search_exact_id(p_kind text, p_id text)
RETURNS TABLE (result text, reason text, event_id uuid, operation_id text)
LANGUAGE plpgsql
SECURITY DEFINER
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_event   uuid;
    v_found   boolean := false;
    v_m       outbox.completeness_manifests%ROWTYPE;
    v_check   record;
    v_guards  jsonb;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('eventId', 'operationId', 'correlationId', 'runId', 'reservationId', 'causationId', 'observationId') THEN
        RAISE EXCEPTION 'search_exact_id: unknown id kind %', pg_catalog.left(coalesce(p_kind, 'NULL'), 64)
            USING ERRCODE = '22023',
                  HINT = 'eventId, operationId, correlationId, runId, reservationId, causationId or observationId';
    END IF;
    IF p_id IS NULL OR p_id = '' OR pg_catalog.length(p_id) > 200 THEN
        RAISE EXCEPTION 'search_exact_id: id must be 1..200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_kind = 'observationId' THEN
        IF p_id !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
            RAISE EXCEPTION 'search_exact_id: an observationId is a lower-case UUID' USING ERRCODE = '22023';
        END IF;
        RETURN QUERY
        SELECT CASE WHEN EXISTS (SELECT 1 FROM intake.observation_ids AS o WHERE o.observation_id = p_id::uuid)
                    THEN 'matched' ELSE 'inconclusive' END::text,
               'positive_match_only'::text, NULL::uuid, NULL::text;
        RETURN;
    END IF;
    IF p_kind = 'eventId' THEN
        IF p_id !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
            RAISE EXCEPTION 'search_exact_id: an eventId is a lower-case UUID' USING ERRCODE = '22023';
        END IF;
        v_event := p_id::uuid;
        RETURN QUERY
        SELECT 'matched'::text, NULL::text, s.event_id,
               (SELECT x.operation_id FROM inbox.projection_exact_ids AS x
                 WHERE x.id_kind = 'eventId' AND x.id_value = p_id AND x.operation_id IS NOT NULL
                   AND x.projection_version = coalesce((SELECT pv.projection_version FROM outbox.projection_versions AS pv
                                                         WHERE pv.projection_name = x.projection_name AND pv.state = 'active'),
                                                        x.projection_version)
                 ORDER BY x.operation_id COLLATE "C" LIMIT 1)
          FROM (SELECT e.event_id FROM outbox.outbox_events AS e WHERE e.event_id = v_event
                UNION ALL
                SELECT a.event_id FROM outbox.archived_events AS a WHERE a.event_id = v_event) AS s;
        v_found := FOUND;
    ELSE
        RETURN QUERY
        SELECT 'matched'::text, NULL::text, x.event_id, pg_catalog.max(x.operation_id COLLATE "C")
          FROM inbox.projection_exact_ids AS x
         WHERE x.id_kind = p_kind AND x.id_value = p_id
           AND x.projection_version = coalesce((SELECT pv.projection_version FROM outbox.projection_versions AS pv
                                                 WHERE pv.projection_name = x.projection_name AND pv.state = 'active'),
                                                x.projection_version)
         GROUP BY x.event_id
         ORDER BY x.event_id;
        v_found := FOUND;
    END IF;
    IF v_found THEN
        RETURN;
    END IF;

    SELECT * INTO v_m FROM outbox.completeness_manifests AS c
     WHERE c.source_filter = '{}' ORDER BY c.taken_at DESC, c.manifest_id DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'inconclusive'::text, 'no_completed_snapshot'::text, NULL::uuid, NULL::text;
        RETURN;
    END IF;
    SELECT * INTO v_check FROM outbox.check_completeness(v_m.manifest_id);
    IF v_check.freshness = 'stale' THEN
        RETURN QUERY SELECT 'inconclusive'::text, 'stale_snapshot'::text, NULL::uuid, NULL::text;
        RETURN;
    ELSIF v_check.freshness <> 'verified_current' THEN
        RETURN QUERY SELECT 'inconclusive'::text, 'no_completed_snapshot'::text, NULL::uuid, NULL::text;
        RETURN;
    END IF;
    IF v_m.status = 'complete_for_supported_scope' THEN
        -- The index kinds need the projector's index in THIS database to cover every event the
        -- projector acknowledged (its inbox may live elsewhere, or a projector may not index):
        -- an acknowledged projection delivery without an index row is a source gap.
        IF p_kind <> 'eventId' AND (
               EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                        WHERE d.required_projection_name IS NOT NULL AND d.status = 'acknowledged'
                          AND NOT EXISTS (SELECT 1 FROM inbox.projection_exact_ids AS x
                                           WHERE x.consumer_name = d.consumer_name
                                             AND x.projection_name = d.required_projection_name
                                             AND x.projection_version = coalesce(
                                                     (SELECT pv.projection_version FROM outbox.projection_versions AS pv
                                                       WHERE pv.projection_name = d.required_projection_name AND pv.state = 'active'),
                                                     d.required_projection_version)
                                             AND x.event_id = d.event_id))
            OR EXISTS (SELECT 1 FROM outbox.archived_deliveries AS a
                        WHERE a.status = 'acknowledged' AND (a.row_image ->> 'required_projection_name') IS NOT NULL
                          AND NOT EXISTS (SELECT 1 FROM inbox.projection_exact_ids AS x
                                           WHERE x.consumer_name = a.row_image ->> 'consumer_name'
                                             AND x.projection_name = a.row_image ->> 'required_projection_name'
                                             AND x.projection_version = coalesce(
                                                     (SELECT pv.projection_version FROM outbox.projection_versions AS pv
                                                       WHERE pv.projection_name = a.row_image ->> 'required_projection_name' AND pv.state = 'active'),
                                                     (a.row_image ->> 'required_projection_version')::integer)
                                             AND x.event_id = a.event_id))) THEN
            RETURN QUERY SELECT 'inconclusive'::text, 'source_gap'::text, NULL::uuid, NULL::text;
            RETURN;
        END IF;
        RETURN QUERY SELECT 'not_found'::text, NULL::text, NULL::uuid, NULL::text;
        RETURN;
    END IF;
    -- the guards object only (the document can be tens of MB: never parsed whole)
    v_guards := pg_catalog.split_part(pg_catalog.split_part(v_m.document, ',"kindSets":', 1), '"guards":', 2)::jsonb;
    RETURN QUERY SELECT 'inconclusive'::text,
        CASE WHEN (v_guards #>> '{nonTerminalDeliveries,count}')::bigint > 0 THEN 'pending_deliveries'
             WHEN (v_guards #>> '{openQuarantine,count}')::bigint > 0 THEN 'quarantine_open'
             ELSE 'source_gap' END,
        NULL::uuid, NULL::text;
END
$fn$;
COMMENT ON FUNCTION outbox.search_exact_id(text, text) IS
    'Exact-id search (SPEC R-OP-3): matched (event, linked operation) | not_found only under a verified_current complete proof of scope {} | inconclusive with its reason. 22023 on an unknown kind or malformed id. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.search_exact_id(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.search_exact_id(text, text) TO outbox_auditor;


RESET ROLE;
