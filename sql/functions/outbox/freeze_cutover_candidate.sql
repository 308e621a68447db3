-- outbox.freeze_cutover_candidate(p_build_id uuid, p_build_token uuid)
--   RETURNS TABLE(boundary_id uuid, boundary_sha256 text, build_token uuid)  (public, SPEC R-PV-2 (a), §13)
-- Purpose: freeze a live build at an exact boundary: every source committed and visible now
--   (outbox.event_source, intake.observations) becomes a member (outbox.cutover_boundary_members:
--   kind, id, envelope digest); the immutable CutoverCandidateBoundary@1 document (canonical
--   RFC 8785 text and its sha256) records the per-kind member counts and set digests
--   (sha256-sorted-lines-v1: sha256 of "<id> <envelopeSha256>\n" lines in id order), the source
--   filter (the event pairs the active set's members route to the projection, observations iff
--   the consumer is a registered observation projector of it) and its jcs digest, the target's
--   semantic definition digest and the expected receipt coordinates (consumer, projection,
--   version). The token rotates (old one: OB001), the build becomes frozen; its claims then hand
--   out only missing members (OB803 after). Cost: one scan of every source (rare, operator call).
-- Locking: build row, then version row FOR UPDATE (waits for shadow receipts in flight).
-- SQLSTATEs: OB001 no live building build with this id and token; OB802 no active delivery-set
--   member routes the projection to exactly one consumer. Caller: outbox_projector.
CREATE OR REPLACE FUNCTION outbox.freeze_cutover_candidate(p_build_id uuid, p_build_token uuid)
 RETURNS TABLE(boundary_id uuid, boundary_sha256 text, build_token uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_name      text;
    v_version   integer;
    v_state     text;
    v_semantic  text;
    v_consumers text[];
    v_filter    jsonb;
    v_doc       jsonb;
    v_text      text;
    v_sha       text;
    v_members   jsonb;
    v_at        timestamptz := pg_catalog.now();
    v_boundary  uuid := pg_catalog.gen_random_uuid();
    v_token     uuid := pg_catalog.gen_random_uuid();
BEGIN
    SELECT b.projection_name, b.projection_version INTO v_name, v_version
      FROM outbox.projection_builds AS b
     WHERE b.build_id = p_build_id AND b.build_token = p_build_token AND b.state = 'building'
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencing rejected: no live building shadow build % with this token', p_build_id
            USING ERRCODE = 'OB001',
                  DETAIL = 'the build is unknown, abandoned, already frozen or switched, or its token was rotated';
    END IF;
    SELECT v.state, v.semantic_definition_sha256 INTO STRICT v_state, v_semantic
      FROM outbox.projection_versions AS v
     WHERE v.projection_name = v_name AND v.projection_version = v_version
       FOR UPDATE;

    -- the consumer and the event pairs the active delivery set routes to this projection
    SELECT pg_catalog.array_agg(DISTINCT m.consumer_name ORDER BY m.consumer_name),
           coalesce(pg_catalog.jsonb_agg(DISTINCT pg_catalog.jsonb_build_object('eventType', m.event_type,
                                                                               'eventSchemaVersion', m.event_schema_version)), '[]'::jsonb)
      INTO v_consumers, v_filter
      FROM outbox.delivery_set_versions AS s
      JOIN outbox.delivery_set_members AS m
        ON m.delivery_set_version = s.delivery_set_version AND m.definition_schema_version = s.definition_schema_version
       AND m.digest_algorithm_version = s.digest_algorithm_version AND m.definition_digest = s.definition_digest
     WHERE s.status = 'active' AND m.projection_state = 'required' AND m.projection_name = v_name;
    IF coalesce(pg_catalog.cardinality(v_consumers), 0) <> 1 THEN
        RAISE EXCEPTION 'freeze: projection % is not routed to exactly one consumer by the active delivery set', v_name
            USING ERRCODE = 'OB802', DETAIL = pg_catalog.format('consumers: %s', coalesce(v_consumers::text, 'none'));
    END IF;
    v_filter := pg_catalog.jsonb_build_object(
        'eventTypes', (SELECT pg_catalog.jsonb_agg(x ORDER BY x->>'eventType', x->>'eventSchemaVersion')
                         FROM pg_catalog.jsonb_array_elements(v_filter) AS x),
        'observations', EXISTS (SELECT 1 FROM intake.observation_projectors AS op
                                 WHERE op.consumer_name = v_consumers[1] AND op.projection_name = v_name));

    -- the exact member set: one statement (one snapshot) over both kinds
    INSERT INTO outbox.cutover_boundary_members (boundary_id, source_kind, source_id, envelope_sha256, source_at)
    SELECT v_boundary, 'event', e.event_id, e.event_envelope_sha256, e.created_at FROM outbox.event_source AS e
    UNION ALL
    SELECT v_boundary, 'observation', o.observation_id, o.accepted_envelope_sha256, o.accepted_at FROM intake.observations AS o;
    SELECT pg_catalog.jsonb_object_agg(k.kind, pg_catalog.jsonb_build_object('count', coalesce(a.n, 0),
               'setSha256', outbox._sha256_hex(coalesce(a.lines, ''))))
      INTO v_members
      FROM (VALUES ('event'), ('observation')) AS k(kind)
      LEFT JOIN (SELECT m.source_kind, pg_catalog.count(*) AS n,
                        pg_catalog.string_agg(m.source_id::text || ' ' || m.envelope_sha256 || E'\n', '' ORDER BY m.source_id) AS lines
                   FROM outbox.cutover_boundary_members AS m
                  WHERE m.boundary_id = v_boundary
                  GROUP BY m.source_kind) AS a ON a.source_kind = k.kind;

    v_doc := pg_catalog.jsonb_build_object(
        'documentType', 'CutoverCandidateBoundary@1',
        'boundaryId', v_boundary::text,
        'buildId', p_build_id::text,
        'projectionName', v_name,
        'projectionVersion', v_version,
        'semanticDefinitionSha256', v_semantic,
        'frozenAt', pg_catalog.to_char(v_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'sourceFilter', v_filter,
        'sourceFilterSha256', outbox.jcs_sha256(v_filter::json),
        'memberSetDigestAlgorithm', 'sha256-sorted-lines-v1',
        'members', v_members,
        'expectedReceipt', pg_catalog.jsonb_build_object('consumerName', v_consumers[1], 'projectionName', v_name,
                                                         'projectionVersion', v_version));
    v_text := outbox.jcs_canonicalize(v_doc::json);
    v_sha := outbox._sha256_hex(v_text);
    INSERT INTO outbox.cutover_boundaries (boundary_id, build_id, projection_name, projection_version, consumer_name,
                                           source_filter, document, boundary_sha256, frozen_at)
    VALUES (v_boundary, p_build_id, v_name, v_version, v_consumers[1], v_filter, v_text, v_sha, v_at);

    UPDATE outbox.projection_builds AS b SET state = 'frozen', build_token = v_token WHERE b.build_id = p_build_id;
    IF v_state = 'shadow' THEN
        UPDATE outbox.projection_versions AS v SET live_build_token = v_token
         WHERE v.projection_name = v_name AND v.projection_version = v_version;
    END IF;
    RETURN QUERY SELECT v_boundary, v_sha, v_token;
END
$function$;

COMMENT ON FUNCTION outbox.freeze_cutover_candidate(uuid, uuid) IS
    'Freeze a live build at an exact source boundary: immutable CutoverCandidateBoundary@1 (members, per-kind set digests, source filter, semantic digest, receipt coordinates), token rotated (old: OB001), build frozen. OB001, OB802. SPEC R-PV-2, §13. Caller: outbox_projector.';

REVOKE ALL ON FUNCTION outbox.freeze_cutover_candidate(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.freeze_cutover_candidate(uuid, uuid) TO outbox_projector;
