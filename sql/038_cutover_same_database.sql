-- Cutover refused across databases (issue 24 item 4; SPEC R-PV-2, §11b OB810): cutover_projection
-- raises OB810, before writing anything, when the boundary's consumer is neither bound in this
-- database's inbox.consumer_roles nor has any receipt of the projection in this database's inbox
-- (its projector writes receipts elsewhere: the guards here could only read an empty inbox).
-- Same signature; the function is replaced in place.
SET LOCAL ROLE outbox_owner;

DROP FUNCTION outbox.cutover_projection(uuid, uuid, integer, integer, text, text);
-- outbox.cutover_projection(p_build_id uuid, p_build_token uuid, p_delivery_set_version integer,
--   p_definition_schema_version integer, p_digest_algorithm_version text, p_definition_digest text)
--   RETURNS TABLE(result text, proof_id uuid, proof_sha256 text, reasons text[])  (public, R-PV-2, R-PV-3)
-- Purpose: switch projection P from its active version to a frozen build's version S in ONE
--   transaction: lock; claims of P's destinations paused (open deliveries locked); guards
--   (outbox._cutover_guards; leases in flight refused, never waited for); an immutable
--   CutoverReadinessProof@1. All 0: active -> frozen, S -> active (CAS, fenced by the token),
--   build switched, delivery set activated, pauses resumed: 'switched'. Else 'blocked' with its
--   reasons and only the proof written. Rollback: the same call with a build of the frozen version.
-- Locking: active version row FOR NO KEY UPDATE NOWAIT (the cutover lock, OB804), then the build
--   and target version rows FOR UPDATE, then P's open deliveries FOR UPDATE.
-- SQLSTATEs: OB001 stale token / build over; OB802 not frozen yet; OB804 lock held; OB810 the
--   projector's inbox is not in this database (consumer unbound here and no receipt of P here);
--   OB101 unknown quartet; 22023 set active or not routing P to S only; OB808 retargets another.
-- Caller: outbox_projector (SECURITY DEFINER).
CREATE FUNCTION outbox.cutover_projection(p_build_id uuid, p_build_token uuid, p_delivery_set_version integer,
                                          p_definition_schema_version integer, p_digest_algorithm_version text,
                                          p_definition_digest text)
RETURNS TABLE (result text, proof_id uuid, proof_sha256 text, reasons text[])
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_name     text;
    v_target   integer;
    v_from     integer;
    v_bstate   text;
    v_tstate   text;
    v_set      text;
    v_targets  integer[];
    v_problem  text;
    v_dests    text[];
    v_guards   jsonb;
    v_reasons  text[];
    v_result   text;
    v_doc      jsonb;
    v_text     text;
    v_sha      text;
    v_proof    uuid := pg_catalog.gen_random_uuid();
    v_at       timestamptz := pg_catalog.clock_timestamp();
    b          outbox.cutover_boundaries%ROWTYPE;
BEGIN
    SELECT x.projection_name, x.projection_version INTO v_name, v_target
      FROM outbox.projection_builds AS x WHERE x.build_id = p_build_id AND x.build_token = p_build_token;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencing rejected: no build % with this token', p_build_id
            USING ERRCODE = 'OB001', DETAIL = 'unknown build, or a token rotated by freeze_cutover_candidate or a later start_shadow_build';
    END IF;
    -- the cutover lock: one cutover of a projection at a time, never waited for
    BEGIN
        SELECT a.projection_version INTO v_from
          FROM outbox.projection_versions AS a
         WHERE a.projection_name = v_name AND a.state = 'active'
           FOR NO KEY UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'cutover already in progress for projection %', v_name
            USING ERRCODE = 'OB804', HINT = 'wait for the other cutover_projection to commit or roll back (SPEC R-PV-2)';
    END;
    IF v_from IS NULL THEN
        RAISE EXCEPTION 'cutover: projection % has no active version', v_name USING ERRCODE = 'OB802';
    END IF;
    SELECT x.state INTO v_bstate FROM outbox.projection_builds AS x
     WHERE x.build_id = p_build_id AND x.build_token = p_build_token FOR UPDATE;
    IF v_bstate = 'building' THEN
        RAISE EXCEPTION 'cutover: build % is not frozen', p_build_id
            USING ERRCODE = 'OB802', HINT = 'freeze it first: outbox.freeze_cutover_candidate';
    ELSIF v_bstate IS DISTINCT FROM 'frozen' THEN
        RAISE EXCEPTION 'fencing rejected: build % is %', p_build_id, coalesce(v_bstate, 'gone')
            USING ERRCODE = 'OB001', DETAIL = 'a switched or abandoned build is over';
    END IF;
    SELECT v.state INTO STRICT v_tstate FROM outbox.projection_versions AS v
     WHERE v.projection_name = v_name AND v.projection_version = v_target FOR UPDATE;
    IF v_tstate NOT IN ('shadow', 'frozen') OR (v_tstate = 'shadow' AND NOT EXISTS (
           SELECT 1 FROM outbox.projection_versions AS v WHERE v.projection_name = v_name
              AND v.projection_version = v_target AND v.live_build_token = p_build_token)) THEN
        RAISE EXCEPTION 'fencing rejected: version %@% is % and not fenced by this token', v_name, v_target, v_tstate
            USING ERRCODE = 'OB001';
    END IF;
    SELECT * INTO STRICT b FROM outbox.cutover_boundaries AS c WHERE c.build_id = p_build_id;
    -- the projector's inbox must be this database (OB810): its consumer is bound here, or this
    -- inbox holds receipts of the projection; otherwise the guards below would read an inbox the
    -- projector never writes (docs/projection-versions.md: the two-phase design across databases)
    IF NOT EXISTS (SELECT 1 FROM inbox.consumer_roles AS cr WHERE cr.consumer_name = b.consumer_name)
       AND NOT EXISTS (SELECT 1 FROM inbox.inbox_receipts AS r
                        WHERE r.consumer_name = b.consumer_name AND r.projection_name = v_name) THEN
        RAISE EXCEPTION 'cutover across databases refused: the inbox of consumer % is not in this database', b.consumer_name
            USING ERRCODE = 'OB810',
                  DETAIL = pg_catalog.format('no inbox.consumer_roles binding of %s and no receipt of projection %s here',
                                             b.consumer_name, v_name),
                  HINT = 'run the projector''s inbox in this database (bind it: inbox.bind_consumer_role); SPEC R-PV-2';
    END IF;

    -- the delivery set to activate: registered, not active, routing P to S only, retargeting nothing else
    SELECT s.status INTO v_set FROM outbox.delivery_set_versions AS s
     WHERE s.delivery_set_version = p_delivery_set_version AND s.definition_schema_version = p_definition_schema_version
       AND s.digest_algorithm_version = p_digest_algorithm_version AND s.definition_digest = p_definition_digest;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no registered delivery-set definition has this quartet' USING ERRCODE = 'OB101',
            DETAIL = pg_catalog.format('(%s, %s, %s, %s)', p_delivery_set_version, p_definition_schema_version,
                                       p_digest_algorithm_version, p_definition_digest);
    END IF;
    SELECT pg_catalog.array_agg(DISTINCT m.projection_version ORDER BY m.projection_version) INTO v_targets
      FROM outbox.delivery_set_members AS m
     WHERE m.delivery_set_version = p_delivery_set_version AND m.definition_schema_version = p_definition_schema_version
       AND m.digest_algorithm_version = p_digest_algorithm_version AND m.definition_digest = p_definition_digest
       AND m.projection_state = 'required' AND m.projection_name = v_name;
    IF v_set = 'active' OR v_targets IS DISTINCT FROM ARRAY[v_target] THEN
        RAISE EXCEPTION 'cutover: delivery set % does not make %@% the target', p_delivery_set_version, v_name, v_target
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('status %s, targets %s of %s', v_set, coalesce(v_targets::text, 'none'), v_name);
    END IF;
    v_problem := outbox._delivery_set_retarget_problem(p_delivery_set_version, p_definition_schema_version,
                                                       p_digest_algorithm_version, p_definition_digest, v_name, v_target);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'delivery-set activation would retarget a projection outside cutover_projection'
            USING ERRCODE = 'OB808', DETAIL = v_problem;
    END IF;

    -- P's destinations under the active set and the new one; pause their claims for this
    -- transaction: their open deliveries are locked (claims SKIP LOCKED them, acks wait)
    SELECT pg_catalog.array_agg(DISTINCT m.destination ORDER BY m.destination) INTO v_dests
      FROM outbox.delivery_set_versions AS s
      JOIN outbox.delivery_set_members AS m
        ON m.delivery_set_version = s.delivery_set_version AND m.definition_schema_version = s.definition_schema_version
       AND m.digest_algorithm_version = s.digest_algorithm_version AND m.definition_digest = s.definition_digest
     WHERE (s.status = 'active' OR s.delivery_set_version = p_delivery_set_version)
       AND m.projection_state = 'required' AND m.projection_name = v_name;
    PERFORM 1 FROM outbox.outbox_deliveries AS d
     WHERE d.destination = ANY (v_dests) AND d.status IN ('pending', 'leased')
       FOR UPDATE;

    v_guards := outbox._cutover_guards(b.boundary_id, v_dests);
    SELECT coalesce(pg_catalog.array_agg(g.key || '=' || g.value ORDER BY g.key), '{}')
      INTO v_reasons
      FROM pg_catalog.jsonb_each_text(v_guards) AS g
     WHERE g.key NOT IN ('checkedBoundaryEvents', 'checkedLaterEvents') AND g.value <> '0';
    v_result := CASE WHEN pg_catalog.cardinality(v_reasons) = 0 THEN 'switched' ELSE 'blocked' END;

    v_doc := pg_catalog.jsonb_build_object(
        'documentType', 'CutoverReadinessProof@1',
        'proofId', v_proof::text,
        'buildId', p_build_id::text,
        'boundaryId', b.boundary_id::text,
        'boundarySha256', b.boundary_sha256,
        'projectionName', v_name,
        'fromVersion', v_from,
        'toVersion', v_target,
        'direction', CASE WHEN v_tstate = 'frozen' THEN 'rollback' ELSE 'forward' END,
        'expectedReceipt', pg_catalog.jsonb_build_object('consumerName', b.consumer_name, 'projectionName', v_name,
                                                         'projectionVersion', v_target),
        'deliverySet', pg_catalog.jsonb_build_object('deliverySetVersion', p_delivery_set_version,
                                                     'definitionSchemaVersion', p_definition_schema_version,
                                                     'digestAlgorithmVersion', p_digest_algorithm_version,
                                                     'definitionDigest', p_definition_digest),
        'destinations', pg_catalog.to_jsonb(coalesce(v_dests, '{}'::text[])),
        'guards', v_guards,
        'result', CASE WHEN v_result = 'switched' THEN 'Switched' ELSE 'Blocked' END,
        'reasons', pg_catalog.to_jsonb(v_reasons),
        'decidedAt', pg_catalog.to_char(v_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
    v_text := outbox.jcs_canonicalize(v_doc::json);
    v_sha := outbox._sha256_hex(v_text);
    INSERT INTO outbox.cutover_readiness_proofs (proof_id, build_id, boundary_id, projection_name, from_version, to_version,
                                                 result, reasons, document, proof_sha256, decided_at, decided_by)
    VALUES (v_proof, p_build_id, b.boundary_id, v_name, v_from, v_target, v_result, v_reasons, v_text, v_sha, v_at, session_user);

    IF v_result = 'switched' THEN
        -- the pointer (CAS on the old active version; the target fenced above by the token)
        UPDATE outbox.projection_versions AS v SET state = 'frozen'
         WHERE v.projection_name = v_name AND v.projection_version = v_from AND v.state = 'active';
        UPDATE outbox.projection_versions AS v SET state = 'active', live_build_id = NULL, live_build_token = NULL
         WHERE v.projection_name = v_name AND v.projection_version = v_target AND v.state = v_tstate;
        UPDATE outbox.projection_builds AS x SET state = 'switched', ended_at = v_at WHERE x.build_id = p_build_id;
        PERFORM outbox.activate_delivery_set(p_delivery_set_version, p_definition_schema_version,
                                             p_digest_algorithm_version, p_definition_digest);
        -- resume the committed pauses of these destinations (an operator's or the runbook's)
        WITH resumed AS (
            DELETE FROM outbox.destination_claim_pauses AS cp WHERE cp.destination = ANY (v_dests)
            RETURNING cp.destination
        )
        INSERT INTO outbox.destination_claim_pause_log (destination, action, reason, changed_by)
        SELECT r.destination, 'resume', 'cutover ' || v_proof::text, session_user FROM resumed AS r;
    END IF;
    RETURN QUERY SELECT v_result, v_proof, v_sha, v_reasons;
END
$fn$;

COMMENT ON FUNCTION outbox.cutover_projection(uuid, uuid, integer, integer, text, text) IS
    'Fenced cutover of a projection to a frozen build''s version (or back, R-PV-3): guards, immutable CutoverReadinessProof@1, pointer switch, delivery-set activation, claims resumed -> switched; any guard non-zero -> blocked (proof only). OB001, OB802, OB804, OB810, OB101, OB808, 22023. SPEC R-PV-2, §13. Caller: outbox_projector.';
REVOKE ALL ON FUNCTION outbox.cutover_projection(uuid, uuid, integer, integer, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.cutover_projection(uuid, uuid, integer, integer, text, text) TO outbox_projector;


RESET ROLE;
