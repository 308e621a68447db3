-- intake._observation_completeness_document(p_filter text)
--   RETURNS TABLE (document text, manifest_sha256 text, status text, member_count bigint)
-- (private helper, SPEC R-OB-4, R-OP-2) The CompletenessProofManifest@1 of the accepted
-- observations (source filter {"sourceKind":"observation"}), RFC 8785 canonical text and its
-- jcs-sha256-v1; deterministic (no time, no position). Observations have their own proof so that
-- intake traffic never makes an event proof stale. Status complete_for_supported_scope iff its
-- guards (receiptAntiJoin, nonTerminalObservationDeliveries) are 0, else partial_source_gap.
-- Design notes (members, guards): docs/intake.md#intake_observation_completeness_document
-- One statement (one snapshot). Caller: outbox._completeness_document; nobody else.
CREATE OR REPLACE FUNCTION intake._observation_completeness_document(p_filter text)
 RETURNS TABLE(document text, manifest_sha256 text, status text, member_count bigint)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET work_mem TO '128MB'
AS $function$
DECLARE
    v_count   bigint;
    v_members text;
    v_kinds   text;
    v_guards  text;
    v_nonzero boolean;
    v_status  text;
    v_doc     text;
BEGIN
    WITH m AS MATERIALIZED (
        SELECT i.observation_id, i.workload_principal_id,
               pg_catalog.format('{"acceptedEnvelopeSha256":"%s","observationId":"%s","payloadPurged":%s}',
                   i.accepted_envelope_sha256, i.observation_id,
                   CASE WHEN pm.observation_id IS NULL THEN 'false' ELSE 'true' END) AS j
          FROM intake.observation_ids AS i
          LEFT JOIN intake.observation_purge_markers AS pm ON pm.observation_id = i.observation_id
    ), g AS (
        SELECT 'receiptAntiJoin' AS guard,
               d.observation_id::text || '/' || pr.consumer_name || '/' || pr.projection_name || '/' || pr.projection_version AS entry
          FROM intake.observation_deliveries AS d
          JOIN intake.observation_projectors AS pr ON pr.consumer_name = d.consumer_name
          JOIN intake.observation_ids AS i ON i.observation_id = d.observation_id
         WHERE NOT EXISTS (SELECT 1 FROM inbox.observation_receipts AS rc
                            WHERE rc.consumer_name = pr.consumer_name AND rc.projection_name = pr.projection_name
                              AND rc.projection_version = pr.projection_version
                              AND rc.observation_id = d.observation_id
                              AND rc.accepted_envelope_sha256 = i.accepted_envelope_sha256)
        UNION ALL
        SELECT 'nonTerminalObservationDeliveries', d.observation_id::text || '/' || d.consumer_name
          FROM intake.observation_deliveries AS d WHERE d.status <> 'acknowledged'
    ), gs AS (
        SELECT g.guard, pg_catalog.count(*) AS n,
               pg_catalog.string_agg(pg_catalog.to_json(g.entry)::text, ',' ORDER BY g.entry COLLATE "C") AS s
          FROM g GROUP BY g.guard
    )
    SELECT (SELECT pg_catalog.count(*) FROM m),
           (SELECT coalesce(pg_catalog.string_agg(m.j, ',' ORDER BY m.observation_id), '') FROM m),
           (SELECT coalesce(pg_catalog.string_agg(
                       pg_catalog.format('{"count":%s,"setSha256":"%s","workloadPrincipalId":%s}',
                           k.n, outbox._sha256_hex('[' || k.s || ']'), pg_catalog.to_json(k.w)),
                       ',' ORDER BY k.w COLLATE "C"), '')
              FROM (SELECT m.workload_principal_id AS w, pg_catalog.count(*) AS n,
                           pg_catalog.string_agg(m.j, ',' ORDER BY m.observation_id) AS s
                      FROM m GROUP BY m.workload_principal_id) AS k),
           (SELECT pg_catalog.string_agg(
                       pg_catalog.format('"%s":{"count":%s,"evaluated":true,"setSha256":"%s"}',
                           v.gn, coalesce(gs.n, 0), outbox._sha256_hex('[' || coalesce(gs.s, '') || ']')),
                       ',' ORDER BY v.gn COLLATE "C")
              FROM (VALUES ('nonTerminalObservationDeliveries'), ('receiptAntiJoin')) AS v(gn)
              LEFT JOIN gs ON gs.guard = v.gn),
           (SELECT coalesce(pg_catalog.sum(gs.n), 0) > 0 FROM gs)
      INTO v_count, v_members, v_kinds, v_guards, v_nonzero;

    v_status := CASE WHEN v_nonzero THEN 'partial_source_gap' ELSE 'complete_for_supported_scope' END;
    v_doc := '{"digestAlgorithmVersion":"jcs-sha256-v1","guards":{' || v_guards
          || '},"kindSets":[' || v_kinds
          || '],"manifestSchemaVersion":1,"manifestType":"CompletenessProofManifest","memberCount":' || v_count
          || ',"memberSetSha256":"' || outbox._sha256_hex('[' || v_members || ']')
          || '","members":[' || v_members
          || '],"parts":[{"part":"observation_intake","receiptEvidence":"observation_receipts"}],"sourceFilter":' || p_filter
          || ',"sourceFilterSha256":"' || outbox._sha256_hex(p_filter)
          || '","status":"' || v_status || '"}';
    RETURN QUERY SELECT v_doc, outbox._sha256_hex(v_doc), v_status, v_count;
END
$function$;

COMMENT ON FUNCTION intake._observation_completeness_document(text) IS
    'Private: the CompletenessProofManifest@1 canonical text of the accepted observations (own member set digest, receipt anti-join), its digest, status and member count (SPEC R-OB-4, R-OP-2).';

REVOKE ALL ON FUNCTION intake._observation_completeness_document(text) FROM PUBLIC;
