-- The observation projector path (SPEC §11a R-OB-4, §13 "Observation intake"; issue 22 item 3):
--   * intake.observation_deliveries: one work row per (registered projector consumer,
--     accepted observation), written by statement-level triggers when an observation is accepted
--     (one INSERT ... SELECT per accepting statement, HP-1) and when a projector is registered
--     (backfill of every accepted observation, after the in-flight accepts committed);
--   * intake.claim_observations / intake.ack_observations (role outbox_observation_projector):
--     fenced leases in (acceptedAt, observationId) order; an ack needs the live lease token, the
--     accepted envelope digest and the projector's receipt for every registered projection of
--     that consumer (another consumer's or projection's receipt never satisfies it);
--   * inbox.record_observation_receipt (the projector's bound consumer role): insert-or-compare;
--   * completeness proofs of accepted observations (scope {"sourceKind":"observation"}: their
--     own member set digest and receipt anti-join, so observation traffic never makes an event
--     proof stale) and search_exact_id('observationId', ...) = matched | inconclusive with
--     reason positive_match_only (never not_found).
-- Applied to a running database: one new table, triggers on intake tables, new functions and
-- three redefined outbox read functions (no lock on any delivery table).
SET LOCAL ROLE outbox_owner;

CREATE TABLE intake.observation_deliveries (
    consumer_name    text NOT NULL,
    -- no foreign key to intake.observation_ids: the rows are written only by the triggers below,
    -- from accepted rows, and a per-row RI check doubled the fan-out's cost on the accept path
    observation_id   uuid NOT NULL,
    accepted_at      timestamptz NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'leased', 'acknowledged')),
    lease_token      uuid,
    lease_owner      text,
    lease_expires_at timestamptz,
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    acknowledged_at  timestamptz,
    PRIMARY KEY (consumer_name, observation_id),
    CHECK ((status = 'pending') = (lease_token IS NULL)),
    CHECK (status = 'pending' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (status <> 'acknowledged' OR acknowledged_at IS NOT NULL)
);
-- the claim's order: open rows of one consumer by (acceptedAt, observationId)
CREATE INDEX observation_deliveries_open ON intake.observation_deliveries (consumer_name, accepted_at, observation_id)
    WHERE status <> 'acknowledged';
COMMENT ON TABLE intake.observation_deliveries IS
    'One work row per registered observation projector consumer and accepted observation (SPEC R-OB-4); written by triggers, changed only by claim_observations/ack_observations.';

-- Work rows of the observation projectors (SPEC R-OB-4): every accepted observation gets one
-- intake.observation_deliveries row per registered projector consumer (a consumer registered
-- for several projections or versions gets one row: its ack needs every one of their receipts).
--   * AFTER INSERT ON intake.observations, per statement (transition table): one INSERT ...
--     SELECT for all the rows the accepting statement inserted (HP-1: no per-row trigger);
--   * AFTER INSERT ON intake.observation_projectors, per statement: a new consumer's backfill.
--     It first takes SHARE on intake.observations, which waits for the accepts in flight to
--     commit and holds new ones back until this transaction ends, so no observation is accepted
--     between "the accept read the projectors" and "the backfill read the observations" (READ
--     COMMITTED: the backfill statement takes its snapshot after the lock).
--     The backfill covers the observations whose payload is still there: one purged before the
--     consumer registered cannot be projected any more and is not its work.
-- ON CONFLICT DO NOTHING: a consumer that registers a second projection has its rows already.
CREATE FUNCTION intake.tg_observations__fanout() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    INSERT INTO intake.observation_deliveries (consumer_name, observation_id, accepted_at)
    SELECT p.consumer_name, n.observation_id, n.accepted_at
      FROM new_rows AS n
     CROSS JOIN (SELECT DISTINCT pr.consumer_name FROM intake.observation_projectors AS pr) AS p
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION intake.tg_observations__fanout() FROM PUBLIC;

CREATE FUNCTION intake.tg_observation_projectors__backfill() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    LOCK TABLE intake.observations IN SHARE MODE;
    INSERT INTO intake.observation_deliveries (consumer_name, observation_id, accepted_at)
    SELECT c.consumer_name, i.observation_id, i.accepted_at
      FROM (SELECT DISTINCT n.consumer_name FROM new_rows AS n) AS c
     CROSS JOIN intake.observations AS i
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION intake.tg_observation_projectors__backfill() FROM PUBLIC;

CREATE TRIGGER tg_observations__fanout AFTER INSERT ON intake.observations
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_observations__fanout();
CREATE TRIGGER tg_observation_projectors__backfill AFTER INSERT ON intake.observation_projectors
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_observation_projectors__backfill();

-- No DELETE or TRUNCATE of work rows (an acknowledged row is the projector's record).
CREATE TRIGGER tg_observation_deliveries__no_delete BEFORE DELETE ON intake.observation_deliveries
    FOR EACH ROW EXECUTE FUNCTION intake.tg_intake__immutable();
CREATE TRIGGER tg_observation_deliveries__no_truncate BEFORE TRUNCATE ON intake.observation_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION intake.tg_intake__immutable();


-- intake.claim_observations(worker text, consumer_name text, batch_size int, lease interval)
--   RETURNS TABLE (observation_id uuid, accepted_at timestamptz, lease_token uuid,
--                  accepted_envelope jsonb, accepted_envelope_sha256 text)
--   (public, SPEC R-OB-4, §13; HP-1)
-- Purpose: lease up to batch_size accepted observations of a registered projector consumer to
--   worker, in (acceptedAt, observationId) order: pending work rows or expired leases. The envelope
--   is NULL when the payload was purged (every projection has its receipt: only acknowledge).
-- Locking: the claimed work rows (SKIP LOCKED: concurrent claimers never wait on each other).
-- SQLSTATEs: 22023 worker not a literal, batch size outside 1..1000, lease outside 1 second..1
--   hour; OB802 consumer_name is not a registered observation projector.
-- Design notes: docs/intake.md#intakeclaim_observations
-- Caller: outbox_observation_projector.
CREATE FUNCTION intake.claim_observations(p_worker text, p_consumer_name text, p_batch_size integer, p_lease interval)
RETURNS TABLE (observation_id uuid, accepted_at timestamptz, lease_token uuid, accepted_envelope jsonb,
               accepted_envelope_sha256 text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    IF p_worker IS NULL OR p_worker !~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$' THEN
        RAISE EXCEPTION 'claim_observations: worker must be a literal' USING ERRCODE = '22023';
    END IF;
    IF p_batch_size IS NULL OR p_batch_size NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim_observations: batch size must be 1..1000' USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'claim_observations: lease must be 1 second..1 hour' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM intake.observation_projectors AS p WHERE p.consumer_name = p_consumer_name) THEN
        RAISE EXCEPTION 'claim_observations: % is not a registered observation projector', pg_catalog.left(coalesce(p_consumer_name, 'NULL'), 100)
            USING ERRCODE = 'OB802',
                  HINT = 'the registrar registers it: SELECT intake.register_observation_projector(consumer_name, projection_name, projection_version)';
    END IF;
    RETURN QUERY
    WITH c AS (
        SELECT d.consumer_name, d.observation_id
          FROM intake.observation_deliveries AS d
         WHERE d.consumer_name = p_consumer_name AND d.status <> 'acknowledged'
           AND (d.status = 'pending' OR d.lease_expires_at <= v_now)
         ORDER BY d.accepted_at, d.observation_id
         LIMIT p_batch_size
           FOR UPDATE SKIP LOCKED
    ), u AS (
        UPDATE intake.observation_deliveries AS d
           SET status = 'leased', lease_token = pg_catalog.gen_random_uuid(), lease_owner = p_worker,
               lease_expires_at = v_now + p_lease, attempts = d.attempts + 1
          FROM c
         WHERE d.consumer_name = c.consumer_name AND d.observation_id = c.observation_id
        RETURNING d.observation_id, d.accepted_at, d.lease_token
    )
    SELECT u.observation_id, u.accepted_at, u.lease_token, o.accepted_envelope, i.accepted_envelope_sha256
      FROM u
      JOIN intake.observation_ids AS i ON i.observation_id = u.observation_id
      LEFT JOIN intake.observations AS o ON o.observation_id = u.observation_id
     ORDER BY u.accepted_at, u.observation_id;
END
$fn$;
COMMENT ON FUNCTION intake.claim_observations(text, text, integer, interval) IS
    'Lease accepted observations of a registered projector consumer in (acceptedAt, observationId) order under fenced leases (SPEC R-OB-4). Caller: outbox_observation_projector.';
REVOKE ALL ON FUNCTION intake.claim_observations(text, text, integer, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.claim_observations(text, text, integer, interval) TO outbox_observation_projector;

-- intake.ack_observations(items json)
--   RETURNS TABLE (observation_id uuid, outcome text, sqlstate text, detail text)
--   (public, SPEC R-OB-4, §13; fenced like R-AK-9; HP-1, HP-2)
-- Purpose: acknowledge many leased observations in one call and one transaction; one row per
--   item in input order: acknowledged | rejected. items = [{consumerName, observationId,
--   leaseToken, acceptedEnvelopeSha256}]. Acknowledged only under a live lease with that token,
--   the accepted envelope's digest, and a receipt for every registered projection of the consumer.
--   Per item: OB001 lease, OB002 digest_mismatch / receipt_missing, 22023 malformed item.
-- SQLSTATEs (whole call): 22023 items not a JSON array, or more than 1000 items.
-- Locking: the acknowledged work rows.
-- Design notes: docs/intake.md#intakeack_observations
-- Caller: outbox_observation_projector.
CREATE FUNCTION intake.ack_observations(p_items json)
RETURNS TABLE (observation_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    c_uuid constant text := '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
    v_now  timestamptz := pg_catalog.clock_timestamp();
    v_n    integer;
BEGIN
    IF p_items IS NULL OR pg_catalog.json_typeof(p_items) <> 'array' THEN
        RAISE EXCEPTION 'ack_observations: items must be a JSON array' USING ERRCODE = '22023';
    END IF;
    v_n := pg_catalog.json_array_length(p_items);
    IF v_n > 1000 THEN
        RAISE EXCEPTION 'ack_observations: at most 1000 items per call' USING ERRCODE = '22023',
              DETAIL = pg_catalog.format('%s items', v_n);
    END IF;
    RETURN QUERY
    WITH raw AS MATERIALIZED (
        SELECT x.ord, x.e, pg_catalog.json_typeof(x.e) = 'object' AS is_obj
          FROM pg_catalog.json_array_elements(p_items) WITH ORDINALITY AS x(e, ord)
    ), f AS (
        SELECT r.ord,
               CASE WHEN r.is_obj THEN r.e ->> 'consumerName' END AS cn,
               CASE WHEN r.is_obj THEN r.e ->> 'observationId' END AS oid_t,
               CASE WHEN r.is_obj THEN r.e ->> 'leaseToken' END AS tok_t,
               CASE WHEN r.is_obj THEN r.e ->> 'acceptedEnvelopeSha256' END AS sha
          FROM raw AS r
    ), p AS MATERIALIZED (
        SELECT f.ord, f.cn, f.sha,
               (f.cn IS NOT NULL AND coalesce(f.oid_t ~ c_uuid, false) AND coalesce(f.tok_t ~ c_uuid, false)
                AND coalesce(f.sha ~ '^[0-9a-f]{64}$', false)) AS well_formed,
               CASE WHEN f.oid_t ~ c_uuid THEN f.oid_t::uuid END AS oid,
               CASE WHEN f.tok_t ~ c_uuid THEN f.tok_t::uuid END AS tok
          FROM f
    ), j AS MATERIALIZED (
        SELECT p.ord, p.oid,
               CASE
                 WHEN NOT p.well_formed THEN '22023'
                 WHEN d.status = 'acknowledged' AND d.lease_token = p.tok THEN NULL
                 WHEN d.status IS DISTINCT FROM 'leased' OR d.lease_token <> p.tok OR d.lease_expires_at <= v_now THEN 'OB001'
                 WHEN i.accepted_envelope_sha256 <> p.sha THEN 'OB002'
                 WHEN EXISTS (SELECT 1 FROM intake.observation_projectors AS pr
                               WHERE pr.consumer_name = p.cn
                                 AND NOT EXISTS (SELECT 1 FROM inbox.observation_receipts AS rc
                                                  WHERE rc.consumer_name = pr.consumer_name
                                                    AND rc.projection_name = pr.projection_name
                                                    AND rc.projection_version = pr.projection_version
                                                    AND rc.observation_id = p.oid
                                                    AND rc.accepted_envelope_sha256 = p.sha)) THEN 'OB002'
                 ELSE NULL
               END AS state,
               CASE
                 WHEN NOT p.well_formed THEN 'item must be {consumerName, observationId, leaseToken, acceptedEnvelopeSha256} with UUIDs and a 64-hex digest'
                 WHEN d.status = 'acknowledged' AND d.lease_token = p.tok THEN 'already_acknowledged'
                 WHEN d.status IS NULL THEN 'no_work_row'
                 WHEN d.status = 'acknowledged' THEN 'finished'
                 WHEN d.status = 'pending' THEN 'not_leased'
                 WHEN d.lease_token <> p.tok THEN 'stale_token'
                 WHEN d.lease_expires_at <= v_now THEN 'lease_expired'
                 WHEN i.accepted_envelope_sha256 <> p.sha THEN 'digest_mismatch'
                 ELSE 'receipt_missing'
               END AS why,
               d.status = 'leased' AS leased, p.cn, p.tok
          FROM p
          LEFT JOIN intake.observation_deliveries AS d ON p.well_formed AND d.consumer_name = p.cn AND d.observation_id = p.oid
          LEFT JOIN intake.observation_ids AS i ON p.well_formed AND i.observation_id = p.oid
    ), u AS (
        UPDATE intake.observation_deliveries AS d
           SET status = 'acknowledged', acknowledged_at = v_now
          FROM (SELECT DISTINCT j.cn, j.oid, j.tok FROM j WHERE j.state IS NULL AND j.leased) AS k
         WHERE d.consumer_name = k.cn AND d.observation_id = k.oid
           AND d.status = 'leased' AND d.lease_token = k.tok   -- re-checked on the row's latest version
        RETURNING d.consumer_name, d.observation_id
    ), r AS (
        SELECT j.ord, j.oid,
               CASE WHEN j.state IS NULL AND j.leased AND NOT EXISTS (SELECT 1 FROM u WHERE u.consumer_name = j.cn AND u.observation_id = j.oid)
                    THEN 'OB001' ELSE j.state END AS state,
               CASE WHEN j.state IS NULL AND j.leased AND NOT EXISTS (SELECT 1 FROM u WHERE u.consumer_name = j.cn AND u.observation_id = j.oid)
                    THEN 'lease_lost' ELSE j.why END AS why
          FROM j
    )
    SELECT r.oid,
           CASE WHEN r.state IS NULL THEN 'acknowledged' ELSE 'rejected' END,
           r.state,
           CASE WHEN r.state IS NULL AND r.why <> 'already_acknowledged' THEN NULL ELSE r.why END
      FROM r
     ORDER BY r.ord;
END
$fn$;
COMMENT ON FUNCTION intake.ack_observations(json) IS
    'Acknowledge leased observations (fenced by lease token, accepted envelope digest and the consumer''s receipts for every registered projection); one row per item, in input order (SPEC R-OB-4). Caller: outbox_observation_projector.';
REVOKE ALL ON FUNCTION intake.ack_observations(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.ack_observations(json) TO outbox_observation_projector;

-- inbox.record_observation_receipt(consumer_name text, projection_name text, projection_version
--   int, observation_id uuid, accepted_envelope_sha256 text) RETURNS TABLE (outcome text)
--   (public, SPEC R-OB-4, R-SEC-5, §13)
-- Purpose: the observation projector records, in the same transaction as its mutation, that
--   (consumer_name, projection_name, projection_version) applied the accepted observation with
--   that envelope digest. Insert-or-compare: new | existing (the same digest was recorded before:
--   the mutation must not be applied again); a receipt of another digest for the same key raises
--   OB301.
-- Checks, in this order: the literals (22023); the caller acts only as itself (the calling role
--   is a member of the role bound to consumer_name, inbox.bind_consumer_role: 42501); the
--   (consumer, projection, version) is a registered observation projector (OB802); an existing
--   receipt of the key (same digest: existing; another: OB301); the observation was accepted
--   with exactly that envelope digest (OB002: unknown id or another digest).
-- Locking: the receipt's primary key (a concurrent recorder of the same key waits, then
--   compares). Caller: the projector's consumer role (bound like any consumer).
CREATE FUNCTION inbox.record_observation_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                                 p_observation_id uuid, p_accepted_envelope_sha256 text)
RETURNS TABLE (outcome text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_have text;
BEGIN
    IF p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._-]{0,99}$'
       OR p_projection_name IS NULL OR p_projection_name !~ '^[a-z0-9][a-z0-9._-]{0,99}$'
       OR p_projection_version IS NULL OR p_projection_version < 1 OR p_observation_id IS NULL
       OR p_accepted_envelope_sha256 IS NULL OR p_accepted_envelope_sha256 !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'record_observation_receipt: argument out of form' USING ERRCODE = '22023',
            HINT = 'consumer and projection names are literals, the version >= 1, the digest 64 lower-case hex';
    END IF;
    PERFORM inbox._inbox_check_caller(p_consumer_name);
    IF NOT EXISTS (SELECT 1 FROM intake.observation_projectors AS p
                    WHERE p.consumer_name = p_consumer_name AND p.projection_name = p_projection_name
                      AND p.projection_version = p_projection_version) THEN
        RAISE EXCEPTION 'record_observation_receipt: % / % version % is not a registered observation projector',
                        p_consumer_name, p_projection_name, p_projection_version
            USING ERRCODE = 'OB802';
    END IF;
    -- insert-or-compare: the insert only for the accepted digest (a concurrent recorder of the
    -- key makes it wait, then do nothing); otherwise the stored receipt decides
    INSERT INTO inbox.observation_receipts (consumer_name, projection_name, projection_version, observation_id,
                                            digest_algorithm_version, accepted_envelope_sha256)
    SELECT p_consumer_name, p_projection_name, p_projection_version, p_observation_id, 'jcs-sha256-v1', p_accepted_envelope_sha256
     WHERE EXISTS (SELECT 1 FROM intake.observation_ids AS o
                    WHERE o.observation_id = p_observation_id AND o.accepted_envelope_sha256 = p_accepted_envelope_sha256)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN QUERY SELECT 'new'::text;
        RETURN;
    END IF;
    SELECT r.accepted_envelope_sha256 INTO v_have FROM inbox.observation_receipts AS r
     WHERE r.consumer_name = p_consumer_name AND r.projection_name = p_projection_name
       AND r.projection_version = p_projection_version AND r.observation_id = p_observation_id;
    IF v_have = p_accepted_envelope_sha256 THEN
        RETURN QUERY SELECT 'existing'::text;
        RETURN;
    ELSIF v_have IS NOT NULL THEN
        RAISE EXCEPTION 'record_observation_receipt: observation % has a receipt of another digest', p_observation_id
            USING ERRCODE = 'OB301';
    END IF;
    RAISE EXCEPTION 'record_observation_receipt: no accepted observation % with that envelope digest', p_observation_id
        USING ERRCODE = 'OB002';
END
$fn$;
COMMENT ON FUNCTION inbox.record_observation_receipt(text, text, integer, uuid, text) IS
    'Record the observation projector''s receipt (insert-or-compare: new | existing; OB301 another digest, OB002 not the accepted digest, OB802 unregistered projector, 42501 not bound) (SPEC R-OB-4).';
REVOKE ALL ON FUNCTION inbox.record_observation_receipt(text, text, integer, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_observation_receipt(text, text, integer, uuid, text) TO outbox_consumer;

-- intake._observation_completeness_document(p_filter text)
--   RETURNS TABLE (document text, manifest_sha256 text, status text, member_count bigint)
-- (private helper, SPEC R-OB-4, R-OP-2) The CompletenessProofManifest@1 of the accepted
-- observations (source filter {"sourceKind":"observation"}), RFC 8785 canonical text and its
-- jcs-sha256-v1; deterministic (no time, no position). Observations have their own proof so that
-- intake traffic never makes an event proof stale. Status complete_for_supported_scope iff its
-- guards (receiptAntiJoin, nonTerminalObservationDeliveries) are 0, else partial_source_gap.
-- Design notes (members, guards): docs/intake.md#intake_observation_completeness_document
-- One statement (one snapshot). Caller: outbox._completeness_document; nobody else.
CREATE FUNCTION intake._observation_completeness_document(p_filter text)
RETURNS TABLE (document text, manifest_sha256 text, status text, member_count bigint)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET work_mem = '128MB'
AS $fn$
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
$fn$;
COMMENT ON FUNCTION intake._observation_completeness_document(text) IS
    'Private: the CompletenessProofManifest@1 canonical text of the accepted observations (own member set digest, receipt anti-join), its digest, status and member count (SPEC R-OB-4, R-OP-2).';
REVOKE ALL ON FUNCTION intake._observation_completeness_document(text) FROM PUBLIC;


DROP FUNCTION outbox._completeness_filter(json);
-- outbox._completeness_filter(p_scope json) RETURNS text  (private helper, SPEC R-OP-2)
-- The canonical source filter of a completeness scope: {} = every event; optional members
-- eventTypes and destinations, each a non-empty array (at most 100) of literals (D-4), sorted
-- and de-duplicated, returned as RFC 8785 text ({"destinations":[..],"eventTypes":[..]}, absent
-- members omitted). {"sourceKind":"observation"} = every accepted observation (R-OB-4; alone:
-- the event members do not apply to it). Its jcs-sha256-v1 is the manifest's sourceFilterSha256.
-- SQLSTATEs: 22023 scope not an object, unknown member, not an array of literals.
-- Locking: none. Caller: take_completeness_snapshot; granted to nobody.
CREATE FUNCTION outbox._completeness_filter(p_scope json)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_key   text;
    v_parts text[] := ARRAY[]::text[];
    v_vals  text[];
BEGIN
    IF p_scope IS NULL OR pg_catalog.json_typeof(p_scope) <> 'object' THEN
        RAISE EXCEPTION 'completeness scope must be a JSON object' USING ERRCODE = '22023',
            HINT = '{} = every event; optional members eventTypes: [..], destinations: [..]; {"sourceKind": "observation"} = every accepted observation';
    END IF;
    FOR v_key IN SELECT k FROM pg_catalog.json_object_keys(p_scope) AS k LOOP
        IF v_key NOT IN ('eventTypes', 'destinations', 'sourceKind') THEN
            RAISE EXCEPTION 'completeness scope: unknown member %', pg_catalog.left(v_key, 64) USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_scope)) <>
       (SELECT pg_catalog.count(DISTINCT k) FROM pg_catalog.json_object_keys(p_scope) AS k) THEN
        RAISE EXCEPTION 'completeness scope: duplicate member' USING ERRCODE = '22023';
    END IF;
    IF p_scope -> 'sourceKind' IS NOT NULL THEN
        IF pg_catalog.json_typeof(p_scope -> 'sourceKind') <> 'string'
           OR (p_scope ->> 'sourceKind') NOT IN ('event', 'observation') THEN
            RAISE EXCEPTION 'completeness scope: sourceKind must be "event" or "observation"' USING ERRCODE = '22023';
        END IF;
        IF (p_scope ->> 'sourceKind') = 'observation' THEN
            IF p_scope -> 'eventTypes' IS NOT NULL OR p_scope -> 'destinations' IS NOT NULL THEN
                RAISE EXCEPTION 'completeness scope: sourceKind "observation" takes no eventTypes or destinations' USING ERRCODE = '22023';
            END IF;
            RETURN '{"sourceKind":"observation"}';
        END IF;
    END IF;
    FOREACH v_key IN ARRAY ARRAY['destinations', 'eventTypes'] LOOP
        CONTINUE WHEN p_scope -> v_key IS NULL;
        IF pg_catalog.json_typeof(p_scope -> v_key) <> 'array'
           OR pg_catalog.json_array_length(p_scope -> v_key) NOT BETWEEN 1 AND 100
           OR EXISTS (SELECT 1 FROM pg_catalog.json_array_elements(p_scope -> v_key) AS x
                       WHERE pg_catalog.json_typeof(x) <> 'string'
                          OR pg_catalog.length(x #>> '{}') > 200
                          OR (x #>> '{}') !~ '^[a-z0-9][a-z0-9._@-]*$') THEN
            RAISE EXCEPTION 'completeness scope: % must be an array of 1..100 literals', v_key USING ERRCODE = '22023',
                HINT = 'literals match ^[a-z0-9][a-z0-9._@-]*$ and are compared exactly (no prefix or wildcard)';
        END IF;
        SELECT pg_catalog.array_agg(DISTINCT x COLLATE "C" ORDER BY x COLLATE "C")
          INTO v_vals FROM pg_catalog.json_array_elements_text(p_scope -> v_key) AS x;
        v_parts := v_parts || pg_catalog.format('"%s":%s', v_key, pg_catalog.to_json(v_vals)::text);
    END LOOP;
    RETURN '{' || pg_catalog.array_to_string(v_parts, ',') || '}';
END
$fn$;
COMMENT ON FUNCTION outbox._completeness_filter(json) IS
    'Private: canonical source filter text of a completeness scope (SPEC R-OP-2). 22023 on a malformed scope.';
REVOKE ALL ON FUNCTION outbox._completeness_filter(json) FROM PUBLIC;

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
    v_pvs     text;
    p_manifest_version integer := 2;  -- the one-argument rendering (017, 028)
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
COMMENT ON FUNCTION outbox._completeness_document(text) IS
    'Private: the CompletenessProofManifest@2 (or @1) canonical text of a source filter over the current state, its jcs-sha256-v1, status and member count (SPEC R-OP-2).';
REVOKE ALL ON FUNCTION outbox._completeness_document(text) FROM PUBLIC;

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
