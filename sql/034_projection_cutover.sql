-- Projection versions, slice R-PV-2/R-PV-3: freeze, fenced cutover, rollback, retire (SPEC §11b,
-- §13 "Projection versions"; codes OB803, OB804, OB808, OB809; docs/projection-versions.md).
--   * claim pauses: outbox.destination_claim_pauses (one row per paused destination) and the
--     append-only outbox.destination_claim_pause_log; pause/resume_destination_claims;
--     outbox.claim_deliveries skips a paused destination (re-created from its file);
--   * outbox.projection_builds gains the states frozen (a boundary is written) and switched
--     (terminal, the cutover made the version active); outbox.cutover_boundaries and
--     outbox.cutover_boundary_members (CutoverCandidateBoundary@1 and its exact member set) and
--     outbox.cutover_readiness_proofs (CutoverReadinessProof@1), all append-only (OB202);
--   * freeze_cutover_candidate, read_cutover_boundary, candidate_progress, cutover_projection,
--     read_readiness_proof, retire_projection_version, drop_retired_projection;
--   * start_shadow_build also starts a rollback build of a frozen version, claim_rebuild_sources
--     hands a frozen build its missing boundary members and then refuses (OB803),
--     activate_delivery_set refuses a retarget outside the cutover (OB808): re-created;
--   * the receipt, revision-progress and gap guards let drop_retired_projection delete rows of
--     a retired version (re-created from their files);
--   * kernel setting projection_rollback_window_seconds (default 7 days): the rollback window.
-- Applied to a running database: new tables; CHECK constraints of outbox.projection_builds and
-- outbox.kernel_settings are replaced (ACCESS EXCLUSIVE on these small tables, one scan each);
-- functions are dropped and re-created in this transaction (a claim or activation in flight
-- waits for the commit). Nothing is paused by the migration.
SET LOCAL ROLE outbox_owner;

-- The rollback window (R-PV-3): a version frozen by a cutover stays the rollback target (not
-- retirable, OB809) for this many seconds after it was frozen. Owner-tunable like the payload
-- limit; 0 closes the window at once.
ALTER TABLE outbox.kernel_settings DROP CONSTRAINT kernel_settings_name_check;
ALTER TABLE outbox.kernel_settings ADD CONSTRAINT kernel_settings_name_check
    CHECK (name IN ('max_payload_bytes', 'projection_rollback_window_seconds'));
ALTER TABLE outbox.kernel_settings DROP CONSTRAINT kernel_settings_value_check;
ALTER TABLE outbox.kernel_settings ADD CONSTRAINT kernel_settings_value_check
    CHECK (value >= 0 AND (name <> 'max_payload_bytes' OR value > 0));
INSERT INTO outbox.kernel_settings (name, value, description) VALUES
    ('projection_rollback_window_seconds', 604800,
     'seconds a projection version frozen by a cutover stays the rollback target (retire refused, OB809)');

-- Claim pauses (R-PV-2 (c)): a row here makes outbox.claim_deliveries skip the destination.
CREATE TABLE outbox.destination_claim_pauses (
    destination text PRIMARY KEY REFERENCES outbox.delivery_destinations (destination),
    reason      text NOT NULL CHECK (reason <> '' AND length(reason) <= 500),
    paused_at   timestamptz NOT NULL DEFAULT now(),
    paused_by   text NOT NULL
);
COMMENT ON TABLE outbox.destination_claim_pauses IS
    'Destinations whose deliveries claim_deliveries does not hand out (SPEC R-PV-2); written only by pause/resume_destination_claims and cutover_projection; every change is in destination_claim_pause_log.';

CREATE TABLE outbox.destination_claim_pause_log (
    log_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination text NOT NULL,
    action      text NOT NULL CHECK (action IN ('pause', 'resume')),
    reason      text,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    changed_by  text NOT NULL
);
COMMENT ON TABLE outbox.destination_claim_pause_log IS
    'Append-only audit of claim pauses and resumes (SPEC R-PV-2).';

-- Builds: frozen (boundary written, token rotated) and switched (terminal) join building and
-- abandoned; a frozen build is still the version's one live build.
ALTER TABLE outbox.projection_builds DROP CONSTRAINT projection_builds_state_check;
ALTER TABLE outbox.projection_builds ADD CONSTRAINT projection_builds_state_check
    CHECK (state IN ('building', 'frozen', 'switched', 'abandoned'));
ALTER TABLE outbox.projection_builds DROP CONSTRAINT projection_builds_check;
ALTER TABLE outbox.projection_builds ADD CONSTRAINT projection_builds_check
    CHECK ((state IN ('building', 'frozen')) = (ended_at IS NULL));
DROP INDEX outbox.projection_builds_one_live;
CREATE UNIQUE INDEX projection_builds_one_live ON outbox.projection_builds (projection_name, projection_version)
    WHERE state IN ('building', 'frozen');

CREATE TABLE outbox.cutover_boundaries (
    boundary_id        uuid PRIMARY KEY,
    build_id           uuid NOT NULL UNIQUE REFERENCES outbox.projection_builds (build_id),
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    consumer_name      text NOT NULL,
    source_filter      jsonb NOT NULL,
    document           text NOT NULL,
    boundary_sha256    text NOT NULL CHECK (boundary_sha256 ~ '^[0-9a-f]{64}$'),
    frozen_at          timestamptz NOT NULL,
    FOREIGN KEY (projection_name, projection_version) REFERENCES outbox.projection_versions
);
COMMENT ON TABLE outbox.cutover_boundaries IS
    'Immutable CutoverCandidateBoundary@1 documents, one per frozen build (SPEC R-PV-2): canonical text and its sha256.';

CREATE TABLE outbox.cutover_boundary_members (
    boundary_id     uuid NOT NULL, -- no foreign key: freeze writes the members first, then the document over them
    source_kind     text NOT NULL CHECK (source_kind IN ('event', 'observation')),
    source_id       uuid NOT NULL,
    envelope_sha256 text NOT NULL,
    source_at       timestamptz NOT NULL,
    PRIMARY KEY (boundary_id, source_kind, source_id)
);
COMMENT ON TABLE outbox.cutover_boundary_members IS
    'The exact source member set of a cutover boundary (SPEC R-PV-2), append-only; its per-kind set digests are in the boundary document.';

CREATE TABLE outbox.cutover_readiness_proofs (
    proof_id             uuid PRIMARY KEY,
    build_id             uuid NOT NULL REFERENCES outbox.projection_builds (build_id),
    boundary_id          uuid NOT NULL REFERENCES outbox.cutover_boundaries (boundary_id),
    projection_name      text NOT NULL,
    from_version         integer NOT NULL,
    to_version           integer NOT NULL,
    result               text NOT NULL CHECK (result IN ('switched', 'blocked')),
    reasons              text[] NOT NULL,
    document             text NOT NULL,
    proof_sha256         text NOT NULL CHECK (proof_sha256 ~ '^[0-9a-f]{64}$'),
    decided_at           timestamptz NOT NULL,
    decided_by           text NOT NULL,
    CHECK ((result = 'switched') = (cardinality(reasons) = 0))
);
CREATE INDEX cutover_readiness_proofs_build ON outbox.cutover_readiness_proofs (build_id, decided_at);
COMMENT ON TABLE outbox.cutover_readiness_proofs IS
    'Append-only CutoverReadinessProof@1 documents (SPEC R-PV-2): one per cutover_projection call that reached its guards, Switched or Blocked with reasons.';

-- Append-only / immutable: the registry guard raises OB202 for every UPDATE, DELETE and TRUNCATE
-- of a table it does not name (triggers/projection_versions__guarded.sql).
CREATE TRIGGER tg_destination_claim_pause_log__append_only BEFORE UPDATE OR DELETE ON outbox.destination_claim_pause_log
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_destination_claim_pause_log__no_truncate BEFORE TRUNCATE ON outbox.destination_claim_pause_log
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_boundaries__immutable BEFORE UPDATE OR DELETE ON outbox.cutover_boundaries
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_boundaries__no_truncate BEFORE TRUNCATE ON outbox.cutover_boundaries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_boundary_members__immutable BEFORE UPDATE OR DELETE ON outbox.cutover_boundary_members
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_boundary_members__no_truncate BEFORE TRUNCATE ON outbox.cutover_boundary_members
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_readiness_proofs__immutable BEFORE UPDATE OR DELETE ON outbox.cutover_readiness_proofs
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_readiness_proofs__no_truncate BEFORE TRUNCATE ON outbox.cutover_readiness_proofs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();

-- outbox.pause_destination_claims(p_destination text, p_reason text) RETURNS void
--   (public, SPEC §11b R-PV-2, §13)
-- Purpose: stop outbox.claim_deliveries from handing out the destination's deliveries (pending
--   ones stay pending; leases already handed out run to their end: ack, retry or expiry). Expired
--   leases of a paused destination are still recovered by a claim naming it (they become pending
--   and wait). Idempotent: pausing a paused destination keeps the first pause and its reason and
--   writes nothing. Each effective pause appends one outbox.destination_claim_pause_log row.
-- Locking: INSERT .. ON CONFLICT DO NOTHING on outbox.destination_claim_pauses (primary key).
-- SQLSTATEs: 22023 destination not registered, reason empty, NULL or longer than 500 characters.
-- Caller: outbox_projector (the cutover runbook) and outbox_operator (incident handling);
--   SECURITY DEFINER, neither has table privileges.
CREATE FUNCTION outbox.pause_destination_claims(p_destination text, p_reason text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_reason IS NULL OR p_reason = '' OR pg_catalog.length(p_reason) > 500 THEN
        RAISE EXCEPTION 'pause destination claims: invalid reason'
            USING ERRCODE = '22023', DETAIL = 'reason is 1..500 characters';
    END IF;
    IF p_destination IS NULL OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS d WHERE d.destination = p_destination) THEN
        RAISE EXCEPTION 'pause destination claims: unknown destination'
            USING ERRCODE = '22023', DETAIL = pg_catalog.format('destination %L is not registered in outbox.delivery_destinations', p_destination);
    END IF;
    INSERT INTO outbox.destination_claim_pauses (destination, reason, paused_by)
    VALUES (p_destination, p_reason, session_user)
    ON CONFLICT (destination) DO NOTHING;
    IF FOUND THEN
        INSERT INTO outbox.destination_claim_pause_log (destination, action, reason, changed_by)
        VALUES (p_destination, 'pause', p_reason, session_user);
    END IF;
END
$fn$;

COMMENT ON FUNCTION outbox.pause_destination_claims(text, text) IS
    'Pause claims of a destination (claim_deliveries skips it), idempotent, audited in destination_claim_pause_log; 22023 unknown destination or bad reason. SPEC R-PV-2, §13. Caller: outbox_projector, outbox_operator.';
REVOKE ALL ON FUNCTION outbox.pause_destination_claims(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.pause_destination_claims(text, text) TO outbox_projector, outbox_operator;

-- outbox.resume_destination_claims(p_destination text) RETURNS void  (public, SPEC §11b R-PV-2, §13)
-- Purpose: end a claim pause of the destination (outbox.pause_destination_claims); its pending
--   deliveries are claimable again at once. Idempotent: resuming a destination that is not
--   paused writes nothing. Each effective resume appends one destination_claim_pause_log row.
-- Locking: DELETE of the destination's outbox.destination_claim_pauses row (primary key).
-- SQLSTATEs: 22023 destination not registered.
-- Caller: outbox_projector and outbox_operator; SECURITY DEFINER (no table privileges).
CREATE FUNCTION outbox.resume_destination_claims(p_destination text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_destination IS NULL OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS d WHERE d.destination = p_destination) THEN
        RAISE EXCEPTION 'resume destination claims: unknown destination'
            USING ERRCODE = '22023', DETAIL = pg_catalog.format('destination %L is not registered in outbox.delivery_destinations', p_destination);
    END IF;
    DELETE FROM outbox.destination_claim_pauses AS p WHERE p.destination = p_destination;
    IF FOUND THEN
        INSERT INTO outbox.destination_claim_pause_log (destination, action, reason, changed_by)
        VALUES (p_destination, 'resume', NULL, session_user);
    END IF;
END
$fn$;

COMMENT ON FUNCTION outbox.resume_destination_claims(text) IS
    'End a claim pause of a destination, idempotent, audited in destination_claim_pause_log; 22023 unknown destination. SPEC R-PV-2, §13. Caller: outbox_projector, outbox_operator.';
REVOKE ALL ON FUNCTION outbox.resume_destination_claims(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.resume_destination_claims(text) TO outbox_projector, outbox_operator;


-- The claim skips paused destinations (its destination look-up statement reads the pauses).
DROP FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text);
-- outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval)
-- RETURNS TABLE(destination, consumer_name, event_id, attempt_id, lease_token, lease_expires_at, ...,
--   event_envelope jsonb, event_envelope_sha256, event_envelope_canonical)  (columns: see CREATE below)
--   (public, SPEC R-CL-1, R-CL-2, R-CL-5, R-CL-6, R-CL-7, R-PV-2, §13; HP-1, HP-3)
-- Purpose: lease up to p_batch_size claimable deliveries (pending, available_at <= now) of the given
--   destinations to p_worker, in (available_at, created_at, event_id) order, after a bounded
--   recovery of expired leases; per-aggregate ordering and claim pauses respected; O(batch), never
--   O(backlog). event_envelope_canonical is the verified canonical text (send it as is, P-5).
-- Time: clock_timestamp() once per call. Run it in its own short transaction (R-CL-5).
-- SQLSTATEs: 22023 invalid_parameter_value for a worker that is not a literal, an empty/NULL or
--   unregistered destination, a batch size outside 1..1000, a lease outside 1 second..1 hour.
-- Design notes (steps, plans, locking): docs/performance-notes.md#outboxclaim_deliveries
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval,
                                        p_envelope text DEFAULT 'jsonb')
RETURNS TABLE (
    destination                             text,
    consumer_name                           text,
    event_id                                uuid,
    attempt_id                              uuid,
    lease_token                             uuid,
    lease_expires_at                        timestamptz,
    attempt_number                          integer,
    expected_receipt_type                   text,
    expected_receipt_schema_version         integer,
    required_projection_name                text,
    required_projection_version             integer,
    event_envelope                          jsonb,
    event_envelope_digest_algorithm_version text,
    event_envelope_sha256                   text,
    event_type                              text,
    event_schema_version                    text,
    event_envelope_canonical                text
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now          timestamptz := pg_catalog.clock_timestamp();
    v_destinations text[];
    v_claimable    text[];
    v_bad          text;
    v_expired      boolean;
BEGIN
    IF p_worker IS NULL OR p_worker !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_worker) > 200 THEN
        RAISE EXCEPTION 'claim_deliveries: invalid worker'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('worker %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_worker);
    END IF;
    IF p_batch_size IS NULL OR p_batch_size < 1 OR p_batch_size > 1000 THEN
        RAISE EXCEPTION 'claim_deliveries: invalid batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('batch_size %s is outside 1..1000', p_batch_size);
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'claim_deliveries: invalid lease'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('lease %s is outside 1 second..1 hour', p_lease);
    END IF;
    IF p_envelope IS NULL OR p_envelope NOT IN ('jsonb', 'canonical') THEN
        RAISE EXCEPTION 'claim_deliveries: invalid envelope form'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('envelope %L must be jsonb or canonical', p_envelope);
    END IF;
    IF p_destinations IS NULL OR pg_catalog.cardinality(p_destinations) = 0 THEN
        RAISE EXCEPTION 'claim_deliveries: no destinations'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'destinations must be a non-empty array of registered destinations';
    END IF;
    -- one statement for the four look-ups before the claim: the first unknown destination, the
    -- distinct sorted list, the same list without paused destinations (R-PV-2: a primary-key
    -- probe of outbox.destination_claim_pauses per destination) and the lease-expiry probe (an
    -- index probe of the small leased index, outbox_deliveries_leased; its answer is used only
    -- when every destination is known)
    SELECT (SELECT coalesce(u.d, 'NULL')
              FROM pg_catalog.unnest(p_destinations) AS u(d)
             WHERE u.d IS NULL
                OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = u.d)
             LIMIT 1),
           (SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) FROM pg_catalog.unnest(p_destinations) AS u(d)),
           (SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) FROM pg_catalog.unnest(p_destinations) AS u(d)
             WHERE NOT EXISTS (SELECT 1 FROM outbox.destination_claim_pauses AS cp WHERE cp.destination = u.d)),
           -- (the destination test is a filter only - IS TRUE is not indexable - so the probe is
           -- always a range scan of the leased index, never a scan of the open-deliveries index by
           -- destination that a plan on unanalyzed tables may prefer: HP-3)
           EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS x
                    WHERE x.status = 'leased' AND x.lease_expires_at <= v_now
                      AND (x.destination = ANY (p_destinations)) IS TRUE)
      INTO v_bad, v_destinations, v_claimable, v_expired;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'claim_deliveries: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %s is not registered in outbox.delivery_destinations', v_bad);
    END IF;

    -- 1. bounded recovery of expired leases of these destinations (R-CL-2), only when one
    --    exists (R-SEC-5: a burst of wake-ups must not multiply the recovery work)
    IF v_expired THEN
        PERFORM outbox._dispatch_recover(v_destinations, p_batch_size, v_now);
    END IF;
    IF v_claimable IS NULL THEN
        RETURN; -- every destination is paused (R-PV-2)
    END IF;

    -- 2. claim (R-CL-1), one statement. Static SQL under plan_cache_mode = force_custom_plan
    -- (the function's SET clause, HP-3): parsed once per session, planned for the actual
    -- arguments on every call, so no generic plan made while the table was small or unanalyzed
    -- (LIMIT $n estimated at 10 % of the table, an index scanned by destination only) is ever
    -- reused. The statement is also shaped to stay O(batch) whatever the statistics say: the
    -- UPDATE finds the locked rows by ctid (TID scan; locked by this transaction, so their ctid
    -- cannot change), and the event of each claimed row is fetched by primary key in a
    -- LATERAL ... LIMIT 1 (never a hash join over the events table).
    RETURN QUERY
    WITH dest AS (
        SELECT dd.destination AS dest_name, dd.ordering AS dest_ordering
          FROM outbox.delivery_destinations AS dd
         WHERE dd.destination = ANY (v_claimable)
    ), picked AS (
        SELECT c.row_ctid
          FROM dest
         CROSS JOIN LATERAL (
                SELECT d.ctid AS row_ctid, d.available_at, d.created_at, d.event_id
                  FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = dest.dest_name
                   AND d.status = 'pending'
                   AND d.available_at <= v_now
                   AND (dest.dest_ordering = 'none'
                        OR NOT EXISTS (
                               SELECT 1
                                 FROM outbox.outbox_deliveries AS prior
                                WHERE prior.destination = d.destination
                                  AND prior.aggregate_id = d.aggregate_id
                                  AND prior.aggregate_revision < d.aggregate_revision
                                  AND prior.status IN ('pending', 'leased')))
                 ORDER BY d.available_at, d.created_at, d.event_id
                 LIMIT p_batch_size
                   FOR UPDATE OF d SKIP LOCKED
              ) AS c
         ORDER BY c.available_at, c.created_at, c.event_id
         LIMIT p_batch_size
    ), claimed AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status             = 'leased',
               lease_owner        = p_worker,
               lease_token        = pg_catalog.gen_random_uuid(),
               lease_expires_at   = v_now + p_lease,
               current_attempt_id = pg_catalog.gen_random_uuid(),
               attempt_count      = d.attempt_count + 1,
               last_attempt_at    = v_now
         WHERE d.ctid = ANY (ARRAY(SELECT picked.row_ctid FROM picked))
           -- true of every picked row (locked, so unchanged); written as one row comparison so
           -- it can only be a filter: the rows are found by ctid (a TID scan), never through the
           -- claimable index that a plan on small or unanalyzed tables might prefer (HP-3)
           AND (d.status, d.destination = ANY (v_claimable), d.available_at <= v_now)
               IS NOT DISTINCT FROM ('pending', true, true)
        RETURNING d.destination AS c_destination, d.event_id AS c_event_id, d.consumer_name AS c_consumer_name,
                  d.current_attempt_id AS c_attempt_id, d.lease_token AS c_lease_token,
                  d.lease_expires_at AS c_lease_expires_at, d.attempt_count AS c_attempt_count,
                  d.expected_receipt_type AS c_receipt_type, d.expected_receipt_schema_version AS c_receipt_version,
                  d.required_projection_name AS c_projection_name, d.required_projection_version AS c_projection_version,
                  d.available_at AS c_available_at, d.created_at AS c_created_at
    ), started AS (
        -- the immutable attempt starts, one set-based INSERT (HP-5); no foreign key check per
        -- row: each start is built from the delivery row this statement just updated
        -- (migration 019 dropped the start -> delivery foreign key, see its header)
        INSERT INTO outbox.outbox_delivery_attempt_starts
               (attempt_id, destination, event_id, attempt_number, lease_token, worker, started_at)
        SELECT c.c_attempt_id, c.c_destination, c.c_event_id, c.c_attempt_count, c.c_lease_token, p_worker, v_now
          FROM claimed AS c
    )
    SELECT c.c_destination, c.c_consumer_name, c.c_event_id, c.c_attempt_id, c.c_lease_token,
           c.c_lease_expires_at, c.c_attempt_count, c.c_receipt_type,
           c.c_receipt_version, c.c_projection_name,
           c.c_projection_version, ev.envelope,
           ev.event_envelope_digest_algorithm_version, ev.event_envelope_sha256,
           ev.event_type, ev.schema_version, ev.canonical
      FROM claimed AS c
     CROSS JOIN LATERAL (
            SELECT CASE WHEN e.event_envelope_canonical IS NULL THEN outbox._event_envelope(e)
                        WHEN p_envelope = 'canonical' THEN NULL
                        ELSE e.event_envelope_canonical::jsonb END AS envelope,
                   e.event_envelope_digest_algorithm_version,
                   e.event_envelope_sha256, e.event_type, e.schema_version,
                   e.event_envelope_canonical AS canonical
              FROM outbox.outbox_events AS e
             WHERE e.event_id = c.c_event_id
             LIMIT 1
          ) AS ev
     ORDER BY c.c_available_at, c.c_created_at, c.c_event_id;
END
$fn$;

COMMENT ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) IS
    'Lease up to batch_size claimable deliveries (pending, available) of the destinations to worker, ordered by available_at, created_at, event_id; FOR UPDATE SKIP LOCKED; appends one attempt start per row; recovers expired leases of those destinations first. 22023 on invalid arguments. SPEC R-CL-1, R-CL-2, R-CL-6, R-CL-7.';
REVOKE ALL ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) TO outbox_dispatcher;


-- outbox._delivery_set_retarget_problem(p_delivery_set_version integer, p_definition_schema_version
--   integer, p_digest_algorithm_version text, p_definition_digest text, p_as_active_name text,
--   p_as_active_version integer) RETURNS text  (private helper, SPEC §11b R-PV-2, OB808)
-- The first projection the registered definition would retarget, as text (NULL: none). For
-- every projection its required members target that has registered versions, the highest
-- targeted version must be the active one and every targeted version active or frozen (several
-- versions of one projection in one set: the highest active, as the migration registers them).
-- p_as_active_name/_version: judge that projection as if that version were active (what
-- outbox.cutover_projection checks before it switches the pointer); NULL: the registry as it is.
-- Projections without versions are not judged (the activation registers them, R-PV-1).
-- Locking: none (reads). Caller: activate_delivery_set, cutover_projection; granted to nobody.
CREATE FUNCTION outbox._delivery_set_retarget_problem(p_delivery_set_version integer, p_definition_schema_version integer,
                                                      p_digest_algorithm_version text, p_definition_digest text,
                                                      p_as_active_name text, p_as_active_version integer)
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.format('%s: targets version(s) %s, the active version is %s', t.projection_name,
                             pg_catalog.array_to_string(t.versions, ','), coalesce(t.active::text, 'none'))
      FROM (SELECT m.projection_name,
                   pg_catalog.array_agg(DISTINCT m.projection_version ORDER BY m.projection_version) AS versions,
                   max(m.projection_version) AS top,
                   CASE WHEN m.projection_name = p_as_active_name THEN p_as_active_version
                        ELSE (SELECT a.projection_version FROM outbox.projection_versions AS a
                               WHERE a.projection_name = m.projection_name AND a.state = 'active') END AS active,
                   bool_and(m.projection_name = p_as_active_name AND m.projection_version = p_as_active_version
                            OR EXISTS (SELECT 1 FROM outbox.projection_versions AS v
                                        WHERE v.projection_name = m.projection_name AND v.projection_version = m.projection_version
                                          AND v.state IN ('active', 'frozen'))) AS all_serving
              FROM outbox.delivery_set_members AS m
             WHERE m.delivery_set_version = p_delivery_set_version
               AND m.definition_schema_version = p_definition_schema_version
               AND m.digest_algorithm_version = p_digest_algorithm_version
               AND m.definition_digest = p_definition_digest
               AND m.projection_state = 'required'
               AND EXISTS (SELECT 1 FROM outbox.projection_versions AS r WHERE r.projection_name = m.projection_name)
             GROUP BY m.projection_name) AS t
     WHERE t.top IS DISTINCT FROM t.active OR NOT t.all_serving
     ORDER BY t.projection_name
     LIMIT 1
$fn$;

COMMENT ON FUNCTION outbox._delivery_set_retarget_problem(integer, integer, text, text, text, integer) IS
    'Private: the first versioned projection a registered delivery-set definition would retarget (highest target not the active version, or a target neither active nor frozen), or NULL. SPEC R-PV-2, OB808.';
REVOKE ALL ON FUNCTION outbox._delivery_set_retarget_problem(integer, integer, text, text, text, integer) FROM PUBLIC;

DROP FUNCTION outbox.activate_delivery_set(integer, integer, text, text);
-- outbox.activate_delivery_set(delivery_set_version, definition_schema_version,
--                              digest_algorithm_version, definition_digest)
-- Purpose: make the registered definition named by its full quartet the one active version of
--   this database (R-DS-5); the previously active version becomes 'retired' (it may be selected
--   again later: activation only ever selects a registered definition, never defines one).
--   Events appended afterwards freeze the new quartet; history is never reinterpreted (R-DS-6).
-- Locking: SHARE ROW EXCLUSIVE on outbox.delivery_set_versions (self-conflicting: activations
--   and registrations serialize; readers such as append_event are not blocked) - a lock no role
--   outside the kernel can take, unlike an advisory key (R-SEC-5); the unique partial index
--   delivery_set_versions_one_active guarantees one active row.
-- Projection versions (R-PV-2): a definition whose members would retarget a projection that
--   has registered versions (highest target not the active version, or a target neither active
--   nor frozen: outbox._delivery_set_retarget_problem) is refused with OB808. The pointer moves
--   only through outbox.cutover_projection, which switches the version first and then calls this
--   function, so the check passes there (no session setting is trusted for it).
-- Raises: OB101 when no registered definition has exactly that quartet; OB808 as above.
-- Caller: outbox_registrar; outbox.cutover_projection (as outbox_owner).
CREATE FUNCTION outbox.activate_delivery_set(
    p_delivery_set_version integer,
    p_definition_schema_version integer,
    p_digest_algorithm_version text,
    p_definition_digest text
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_status  text;
    v_problem text;
BEGIN
    LOCK TABLE outbox.delivery_set_versions IN SHARE ROW EXCLUSIVE MODE;
    SELECT status INTO v_status
    FROM outbox.delivery_set_versions
    WHERE delivery_set_version = p_delivery_set_version
      AND definition_schema_version = p_definition_schema_version
      AND digest_algorithm_version = p_digest_algorithm_version
      AND definition_digest = p_definition_digest
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no registered delivery-set definition has this quartet'
            USING ERRCODE = 'OB101',
                  DETAIL = format('(%s, %s, %s, %s)', p_delivery_set_version, p_definition_schema_version,
                                  p_digest_algorithm_version, p_definition_digest),
                  HINT = 'register the definition with outbox.register_delivery_set first';
    END IF;
    IF v_status = 'active' THEN
        RETURN;
    END IF;
    v_problem := outbox._delivery_set_retarget_problem(p_delivery_set_version, p_definition_schema_version,
                                                       p_digest_algorithm_version, p_definition_digest, NULL, NULL);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'delivery-set activation would retarget a projection outside cutover_projection'
            USING ERRCODE = 'OB808', DETAIL = v_problem,
                  HINT = 'build the version as a shadow and switch with outbox.cutover_projection, which activates the set (SPEC R-PV-2)';
    END IF;
    UPDATE outbox.delivery_set_versions SET status = 'retired' WHERE status = 'active';
    UPDATE outbox.delivery_set_versions SET status = 'active', activated_at = now()
    WHERE delivery_set_version = p_delivery_set_version;
END
$fn$;

COMMENT ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) IS
    'Make one registered delivery-set quartet the active version (SPEC R-DS-5). Raises OB101; OB808 when it would retarget a versioned projection outside cutover_projection (R-PV-2). Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) TO outbox_registrar;


DROP FUNCTION outbox.start_shadow_build(text, integer);
-- outbox.start_shadow_build(p_projection_name text, p_projection_version integer)
--   RETURNS TABLE(build_id uuid, build_token uuid)  (public, R-PV-1, R-PV-3)
-- Purpose: start a shadow (re)build of a registered shadow version, or of the frozen former
--   version (the rollback candidate). One live build per version: a second start ABANDONS the
--   live one (its token dead at once: OB001) and rotates, so a lost builder is replaced without
--   an operator step; receipts the abandoned build committed stay (content-addressed).
-- Locking: the version row FOR UPDATE (serialises starts; waits for shadow receipts in flight,
--   which hold it FOR SHARE while checking the token); the partial unique index
--   projection_builds_one_live keeps one 'building' row per version.
-- SQLSTATEs: 22023 invalid projection key; OB802 the version is not registered, or active or
--   retired.
-- Caller: outbox_projector (SECURITY DEFINER).
-- Design notes: docs/projection-versions.md#outboxstart_shadow_build
CREATE FUNCTION outbox.start_shadow_build(p_projection_name text, p_projection_version integer)
RETURNS TABLE (build_id uuid, build_token uuid)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_state text;
    v_build uuid := pg_catalog.gen_random_uuid();
    v_token uuid := pg_catalog.gen_random_uuid();
BEGIN
    IF p_projection_name IS NULL OR p_projection_name !~ '^[a-z0-9][a-z0-9._@-]*$'
       OR p_projection_version IS NULL OR p_projection_version < 1 THEN
        RAISE EXCEPTION 'shadow build: invalid projection key'
            USING ERRCODE = '22023', DETAIL = 'projection_name must match ^[a-z0-9][a-z0-9._@-]*$ and projection_version >= 1';
    END IF;
    SELECT v.state INTO v_state
      FROM outbox.projection_versions AS v
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'shadow build: projection version %@% is not registered', p_projection_name, p_projection_version
            USING ERRCODE = 'OB802', HINT = 'register it first: outbox.register_projection_version (outbox_registrar)';
    END IF;
    IF v_state NOT IN ('shadow', 'frozen') THEN
        RAISE EXCEPTION 'shadow build: projection version %@% is %', p_projection_name, p_projection_version, v_state
            USING ERRCODE = 'OB802', DETAIL = 'only a shadow or frozen version is built; an active version keeps serving its deliveries';
    END IF;

    UPDATE outbox.projection_builds AS b
       SET state = 'abandoned', ended_at = pg_catalog.now()
     WHERE b.projection_name = p_projection_name AND b.projection_version = p_projection_version
       AND b.state IN ('building', 'frozen');
    INSERT INTO outbox.projection_builds (build_id, projection_name, projection_version, build_token, state, started_by)
    VALUES (v_build, p_projection_name, p_projection_version, v_token, 'building', session_user);
    UPDATE outbox.projection_versions AS v
       SET live_build_id = v_build, live_build_token = v_token
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version
       AND v.state = 'shadow';

    RETURN QUERY SELECT v_build, v_token;
END
$fn$;

COMMENT ON FUNCTION outbox.start_shadow_build(text, integer) IS
    'Start a shadow build of a registered shadow version, or a rollback build of a frozen one: (build_id, build_token); a live build of the same version is abandoned (its token dies: OB001). OB802 not registered, active or retired. SPEC R-PV-1, R-PV-3, §13. Caller: outbox_projector.';
REVOKE ALL ON FUNCTION outbox.start_shadow_build(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.start_shadow_build(text, integer) TO outbox_projector;

DROP FUNCTION outbox.claim_rebuild_sources(uuid, uuid, integer);
-- outbox.claim_rebuild_sources(p_build_id uuid, p_build_token uuid, p_batch_size integer)
--   RETURNS TABLE(source_kind text, source_id uuid, envelope jsonb, envelope_sha256 text)  (public, R-PV-1)
-- Purpose: hand the next batch of rebuild sources to a live shadow build, each exactly once per
--   build, read only from outbox.event_source and accepted observations (never append_event or
--   the delivery tables), in one order over both kinds: (source_at, source_kind, source_id). A
--   ledger row per handed-out source and the build's cursor advance in the same set-based
--   statement; a one-minute rescan behind the cursor picks up late commits. A frozen build hands
--   out only the boundary members its ledger lacks, then OB803 (later sources: dual-apply).
-- Locking: the build row FOR UPDATE (token fence; concurrent claimers of one build serialise and
--   never get the same source; REPEATABLE READ callers may get 40001).
-- SQLSTATEs: 22023 batch_size outside 1..1000; OB001 no live build with this id and token;
--   OB803 a frozen build whose boundary is completely handed out.
-- Caller: outbox_projector (SECURITY DEFINER).
-- Design notes: docs/projection-versions.md#outboxclaim_rebuild_sources
CREATE FUNCTION outbox.claim_rebuild_sources(p_build_id uuid, p_build_token uuid, p_batch_size integer)
RETURNS TABLE (source_kind text, source_id uuid, envelope jsonb, envelope_sha256 text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_cursor   timestamptz;
    v_from     timestamptz;
    v_state    text;
    v_boundary uuid;
BEGIN
    IF p_batch_size IS NULL OR p_batch_size < 1 OR p_batch_size > 1000 THEN
        RAISE EXCEPTION 'claim rebuild sources: batch_size must be 1..1000' USING ERRCODE = '22023';
    END IF;
    SELECT b.cursor_at, b.state INTO v_cursor, v_state
      FROM outbox.projection_builds AS b
     WHERE b.build_id = p_build_id AND b.build_token = p_build_token AND b.state IN ('building', 'frozen')
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencing rejected: no live shadow build % with this token', p_build_id
            USING ERRCODE = 'OB001',
                  DETAIL = 'the build is unknown, abandoned, or its token was rotated by a later start_shadow_build',
                  HINT = 'start a new build with outbox.start_shadow_build (SPEC R-PV-1)';
    END IF;
    IF v_state = 'frozen' THEN
        SELECT c.boundary_id INTO STRICT v_boundary FROM outbox.cutover_boundaries AS c WHERE c.build_id = p_build_id;
        RETURN QUERY
        WITH keys AS (
            SELECT m.source_kind AS k, m.source_id AS id, m.source_at AS at
              FROM outbox.cutover_boundary_members AS m
             WHERE m.boundary_id = v_boundary
               AND NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                                WHERE l.build_id = p_build_id AND l.source_kind = m.source_kind AND l.source_id = m.source_id)
             ORDER BY m.source_at, m.source_kind, m.source_id
             LIMIT p_batch_size
        ), cand AS (
            SELECT k.k, k.id, k.at, e.envelope AS env, e.event_envelope_sha256 AS sha
              FROM keys AS k
              JOIN outbox.event_source AS e ON e.event_id = k.id
             WHERE k.k = 'event'
            UNION ALL
            SELECT k.k, k.id, k.at, o.accepted_envelope, o.accepted_envelope_sha256
              FROM keys AS k
              JOIN intake.observations AS o ON o.observation_id = k.id
             WHERE k.k = 'observation'
        ), ins AS (
            INSERT INTO outbox.projection_build_sources (build_id, source_kind, source_id, source_at)
            SELECT p_build_id, c.k, c.id, c.at FROM cand AS c
            RETURNING 1 AS one
        ), adv AS (
            UPDATE outbox.projection_builds AS b
               SET cursor_at = GREATEST(b.cursor_at, (SELECT max(c.at) FROM cand AS c)),
                   sources_claimed = b.sources_claimed + (SELECT count(*) FROM ins)
             WHERE b.build_id = p_build_id
        )
        SELECT c.k, c.id, c.env, c.sha FROM cand AS c ORDER BY c.at, c.k, c.id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'source outside the frozen cutover boundary: build % has handed out its whole boundary', p_build_id
                USING ERRCODE = 'OB803',
                      DETAIL = pg_catalog.format('boundary %s: every member is handed out; later sources reach the shadow by dual-apply', v_boundary),
                      HINT = 'stop claiming; outbox.cutover_projection when the shadow is ready (SPEC R-PV-2)';
        END IF;
        RETURN;
    END IF;
    v_from := coalesce(v_cursor - interval '1 minute', '-infinity'::timestamptz);

    RETURN QUERY
    -- keys first (no envelope is built for a source that is not handed out), then the envelopes
    -- of the chosen ones by primary key
    WITH keys AS (
        SELECT s.k, s.id, s.at
          FROM (SELECT 'event'::text AS k, e.event_id AS id, e.created_at AS at
                  FROM outbox.event_source AS e
                 WHERE e.created_at >= v_from
                UNION ALL
                SELECT 'observation'::text, o.observation_id, o.accepted_at
                  FROM intake.observations AS o
                 WHERE o.accepted_at >= v_from) AS s
         WHERE NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                            WHERE l.build_id = p_build_id AND l.source_kind = s.k AND l.source_id = s.id)
         ORDER BY s.at, s.k, s.id
         LIMIT p_batch_size
    ), cand AS (
        SELECT k.k, k.id, k.at, e.envelope AS env, e.event_envelope_sha256 AS sha
          FROM keys AS k
          JOIN outbox.event_source AS e ON e.event_id = k.id
         WHERE k.k = 'event'
        UNION ALL
        SELECT k.k, k.id, k.at, o.accepted_envelope, o.accepted_envelope_sha256
          FROM keys AS k
          JOIN intake.observations AS o ON o.observation_id = k.id
         WHERE k.k = 'observation'
    ), ins AS (
        INSERT INTO outbox.projection_build_sources (build_id, source_kind, source_id, source_at)
        SELECT p_build_id, c.k, c.id, c.at FROM cand AS c
        RETURNING 1 AS one
    ), adv AS (
        UPDATE outbox.projection_builds AS b
           SET cursor_at = GREATEST(b.cursor_at, (SELECT max(c.at) FROM cand AS c)),
               sources_claimed = b.sources_claimed + (SELECT count(*) FROM ins)
         WHERE b.build_id = p_build_id
    )
    SELECT c.k, c.id, c.env, c.sha FROM cand AS c ORDER BY c.at, c.k, c.id;
END
$fn$;

COMMENT ON FUNCTION outbox.claim_rebuild_sources(uuid, uuid, integer) IS
    'Next batch of rebuild sources of a live shadow build (events of outbox.event_source and accepted observations), each once per build, in (source_at, source_kind, source_id) order; OB001 stale or unknown build token; a frozen build gets only its missing boundary members, then OB803; 22023 batch outside 1..1000. SPEC R-PV-1, R-PV-2, §13. Caller: outbox_projector.';
REVOKE ALL ON FUNCTION outbox.claim_rebuild_sources(uuid, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.claim_rebuild_sources(uuid, uuid, integer) TO outbox_projector;


-- outbox._cutover_guards(p_boundary_id uuid, p_destinations text[]) RETURNS jsonb
--   (private helper, SPEC §11b R-PV-2 (c), R-PV-5)
-- The readiness guards of a frozen boundary's shadow (consumer C, projection P, version S of the
-- boundary), each a count that must be 0 for a cutover: boundaryMismatch (the document is not
-- canonical, not its sha256, or its member digests differ from the member rows),
-- boundaryNotHandedOut (members the build's ledger lacks), missingReceipts (the receipt
-- anti-join: events of outbox.event_source in the source filter - boundary members and every
-- later event alike - without a receipt of (C, P, S) for that envelope digest),
-- missingObservationReceipts (likewise for observations, when the filter has them), openGaps
-- (open revision gaps of (C, P, S)), openQuarantine and leasesInFlight (deliveries of
-- p_destinations quarantined / leased), unsupportedSchemas (hot deliveries routed to P whose
-- event pair is outside the filter); plus checkedBoundaryEvents / checkedLaterEvents.
-- Cost: scans every event once (operator call). Locking: none. Caller: cutover_projection,
-- candidate_progress (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._cutover_guards(p_boundary_id uuid, p_destinations text[])
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    b        outbox.cutover_boundaries%ROWTYPE;
    v_out    jsonb;
    v_digest jsonb;
BEGIN
    SELECT * INTO STRICT b FROM outbox.cutover_boundaries AS c WHERE c.boundary_id = p_boundary_id;
    SELECT pg_catalog.jsonb_object_agg(k.kind, pg_catalog.jsonb_build_object('count', coalesce(a.n, 0),
               'setSha256', outbox._sha256_hex(coalesce(a.lines, ''))))
      INTO v_digest
      FROM (VALUES ('event'), ('observation')) AS k(kind)
      LEFT JOIN (SELECT m.source_kind, pg_catalog.count(*) AS n,
                        pg_catalog.string_agg(m.source_id::text || ' ' || m.envelope_sha256 || E'\n', '' ORDER BY m.source_id) AS lines
                   FROM outbox.cutover_boundary_members AS m
                  WHERE m.boundary_id = p_boundary_id
                  GROUP BY m.source_kind) AS a ON a.source_kind = k.kind;

    WITH scope AS (
        SELECT e.event_id, e.event_envelope_sha256,
               EXISTS (SELECT 1 FROM outbox.cutover_boundary_members AS m
                        WHERE m.boundary_id = p_boundary_id AND m.source_kind = 'event' AND m.source_id = e.event_id) AS in_boundary,
               EXISTS (SELECT 1 FROM inbox.inbox_receipts AS r
                        WHERE r.consumer_name = b.consumer_name AND r.projection_name = b.projection_name
                          AND r.projection_version = b.projection_version AND r.event_id = e.event_id
                          AND r.event_envelope_sha256 = e.event_envelope_sha256) AS has_receipt
          FROM outbox.event_source AS e
         WHERE EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(b.source_filter->'eventTypes') AS f
                        WHERE f->>'eventType' = e.event_type AND f->>'eventSchemaVersion' = e.schema_version)
    )
    SELECT pg_catalog.jsonb_build_object(
        'boundaryMismatch',
            CASE WHEN outbox._sha256_hex(b.document) <> b.boundary_sha256
                      OR outbox.jcs_canonicalize(b.document::json) <> b.document
                      OR (b.document::jsonb)->'members' IS DISTINCT FROM v_digest THEN 1 ELSE 0 END,
        'boundaryNotHandedOut',
            (SELECT pg_catalog.count(*) FROM outbox.cutover_boundary_members AS m
              WHERE m.boundary_id = p_boundary_id
                AND NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                                 WHERE l.build_id = b.build_id AND l.source_kind = m.source_kind AND l.source_id = m.source_id)),
        'missingReceipts', (SELECT pg_catalog.count(*) FROM scope AS s WHERE NOT s.has_receipt),
        'missingObservationReceipts',
            CASE WHEN (b.source_filter->>'observations')::boolean THEN
                 (SELECT pg_catalog.count(*) FROM intake.observations AS o
                   WHERE NOT EXISTS (SELECT 1 FROM inbox.observation_receipts AS r
                                      WHERE r.consumer_name = b.consumer_name AND r.projection_name = b.projection_name
                                        AND r.projection_version = b.projection_version AND r.observation_id = o.observation_id))
                 ELSE 0 END,
        'openGaps',
            (SELECT pg_catalog.count(*) FROM inbox.inbox_revision_gaps AS g
              WHERE g.consumer_name = b.consumer_name AND g.projection_name = b.projection_name
                AND g.projection_version = b.projection_version AND g.closed_at IS NULL),
        'openQuarantine',
            (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS d
              WHERE d.destination = ANY (p_destinations) AND d.status = 'quarantined'),
        'leasesInFlight',
            (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS d
              WHERE d.destination = ANY (p_destinations) AND d.status = 'leased'),
        'unsupportedSchemas',
            (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS d
               JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
              WHERE d.required_projection_name = b.projection_name
                AND NOT EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(b.source_filter->'eventTypes') AS f
                                 WHERE f->>'eventType' = e.event_type AND f->>'eventSchemaVersion' = e.schema_version)),
        'checkedBoundaryEvents', (SELECT pg_catalog.count(*) FROM scope AS s WHERE s.in_boundary),
        'checkedLaterEvents', (SELECT pg_catalog.count(*) FROM scope AS s WHERE NOT s.in_boundary))
      INTO v_out;
    RETURN v_out;
END
$fn$;

COMMENT ON FUNCTION outbox._cutover_guards(uuid, text[]) IS
    'Private: the readiness guard counts of a frozen boundary (boundary integrity, catch-up, receipt anti-join over boundary and later events, gaps, quarantine, leases, unsupported schemas). SPEC R-PV-2.';
REVOKE ALL ON FUNCTION outbox._cutover_guards(uuid, text[]) FROM PUBLIC;

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
CREATE FUNCTION outbox.freeze_cutover_candidate(p_build_id uuid, p_build_token uuid)
RETURNS TABLE (boundary_id uuid, boundary_sha256 text, build_token uuid)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
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
$fn$;

COMMENT ON FUNCTION outbox.freeze_cutover_candidate(uuid, uuid) IS
    'Freeze a live build at an exact source boundary: immutable CutoverCandidateBoundary@1 (members, per-kind set digests, source filter, semantic digest, receipt coordinates), token rotated (old: OB001), build frozen. OB001, OB802. SPEC R-PV-2, §13. Caller: outbox_projector.';
REVOKE ALL ON FUNCTION outbox.freeze_cutover_candidate(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.freeze_cutover_candidate(uuid, uuid) TO outbox_projector;

-- outbox.read_cutover_boundary(p_boundary_id uuid) RETURNS json  (public, SPEC R-PV-2, §13)
-- Purpose: the CutoverCandidateBoundary@1 document of a boundary exactly as frozen (its
--   canonical RFC 8785 text as json: outbox.jcs_canonicalize(doc) = doc and sha256(doc) is
--   boundary_sha256 of freeze_cutover_candidate); NULL for an unknown boundary.
-- Locking: none (a primary-key read). SQLSTATEs: none of its own.
-- Caller: outbox_auditor; SECURITY DEFINER (no table privileges).
CREATE FUNCTION outbox.read_cutover_boundary(p_boundary_id uuid)
RETURNS json
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT c.document::json FROM outbox.cutover_boundaries AS c WHERE c.boundary_id = p_boundary_id
$fn$;

COMMENT ON FUNCTION outbox.read_cutover_boundary(uuid) IS
    'The CutoverCandidateBoundary@1 document (canonical text) of a boundary, or NULL. SPEC R-PV-2, §13. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.read_cutover_boundary(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.read_cutover_boundary(uuid) TO outbox_auditor;

-- outbox.candidate_progress(p_build_id uuid) RETURNS TABLE(state text, built bigint, remaining
--   bigint, lag_seconds double precision)  (public, SPEC R-PV-5, §13)
-- Purpose: where a build stands. built = sources handed out to it. building: remaining = sources
--   not handed out yet, lag = age of the oldest of them. frozen: remaining = boundary members not
--   handed out + in-filter events (boundary and later) without a shadow receipt + observations
--   without one (outbox._cutover_guards), lag = age of the oldest of those sources; state
--   'ready' when remaining = 0, else 'blocked' when the build's last cutover attempt was
--   blocked, 'catching_up' when a claim ran since the freeze, 'frozen' otherwise (ready counts
--   receipts only: leases, gaps and quarantine are judged by cutover_projection). switched and
--   abandoned builds: remaining 0, lag 0. Unknown build: no row.
-- Cost: scans every source (an operator's call). Locking: none.
-- Caller: outbox_auditor; SECURITY DEFINER (no table privileges).
CREATE FUNCTION outbox.candidate_progress(p_build_id uuid)
RETURNS TABLE (state text, built bigint, remaining bigint, lag_seconds double precision)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    b          outbox.projection_builds%ROWTYPE;
    v_boundary outbox.cutover_boundaries%ROWTYPE;
    v_guards   jsonb;
    v_rem      bigint;
    v_oldest   timestamptz;
    v_last     text;
BEGIN
    SELECT * INTO b FROM outbox.projection_builds AS x WHERE x.build_id = p_build_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF b.state IN ('switched', 'abandoned') THEN
        RETURN QUERY SELECT b.state, b.sources_claimed, 0::bigint, 0::double precision;
        RETURN;
    END IF;
    IF b.state = 'building' THEN
        SELECT pg_catalog.count(*), min(s.at) INTO v_rem, v_oldest
          FROM (SELECT 'event'::text AS k, e.event_id AS id, e.created_at AS at FROM outbox.event_source AS e
                UNION ALL
                SELECT 'observation', o.observation_id, o.accepted_at FROM intake.observations AS o) AS s
         WHERE NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                            WHERE l.build_id = p_build_id AND l.source_kind = s.k AND l.source_id = s.id);
        RETURN QUERY SELECT 'building'::text, b.sources_claimed, v_rem,
                            coalesce(extract(epoch FROM pg_catalog.now() - v_oldest)::double precision, 0);
        RETURN;
    END IF;

    SELECT * INTO STRICT v_boundary FROM outbox.cutover_boundaries AS c WHERE c.build_id = p_build_id;
    v_guards := outbox._cutover_guards(v_boundary.boundary_id, '{}'::text[]);
    v_rem := (v_guards->>'boundaryNotHandedOut')::bigint + (v_guards->>'missingReceipts')::bigint
             + (v_guards->>'missingObservationReceipts')::bigint;
    SELECT min(x.at) INTO v_oldest
      FROM (SELECT m.source_at AS at FROM outbox.cutover_boundary_members AS m
             WHERE m.boundary_id = v_boundary.boundary_id
               AND NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                                WHERE l.build_id = p_build_id AND l.source_kind = m.source_kind AND l.source_id = m.source_id)
            UNION ALL
            SELECT e.created_at FROM outbox.event_source AS e
             WHERE EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(v_boundary.source_filter->'eventTypes') AS f
                            WHERE f->>'eventType' = e.event_type AND f->>'eventSchemaVersion' = e.schema_version)
               AND NOT EXISTS (SELECT 1 FROM inbox.inbox_receipts AS r
                                WHERE r.consumer_name = v_boundary.consumer_name AND r.projection_name = v_boundary.projection_name
                                  AND r.projection_version = v_boundary.projection_version AND r.event_id = e.event_id
                                  AND r.event_envelope_sha256 = e.event_envelope_sha256)) AS x;
    SELECT p.result INTO v_last FROM outbox.cutover_readiness_proofs AS p
     WHERE p.build_id = p_build_id ORDER BY p.decided_at DESC LIMIT 1;
    RETURN QUERY SELECT
        CASE WHEN v_rem = 0 THEN 'ready'
             WHEN v_last = 'blocked' THEN 'blocked'
             WHEN EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                           WHERE l.build_id = p_build_id AND l.claimed_at > v_boundary.frozen_at) THEN 'catching_up'
             ELSE 'frozen' END,
        b.sources_claimed, v_rem,
        coalesce(extract(epoch FROM pg_catalog.now() - v_oldest)::double precision, 0);
END
$fn$;

COMMENT ON FUNCTION outbox.candidate_progress(uuid) IS
    'Progress of a build: state building|frozen|catching_up|ready|switched|blocked|abandoned, built, remaining, lag_seconds; no row for an unknown build. SPEC R-PV-5, §13. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.candidate_progress(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.candidate_progress(uuid) TO outbox_auditor;

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

-- outbox.read_readiness_proof(p_proof_id uuid) RETURNS json  (public, SPEC R-PV-2, §13)
-- Purpose: the CutoverReadinessProof@1 document of a proof exactly as written by
--   outbox.cutover_projection (canonical RFC 8785 text as json; sha256 of it is proof_sha256);
--   NULL for an unknown proof. Proofs are append-only (OB202).
-- Locking: none (a primary-key read). SQLSTATEs: none of its own.
-- Caller: outbox_auditor; SECURITY DEFINER (no table privileges).
CREATE FUNCTION outbox.read_readiness_proof(p_proof_id uuid)
RETURNS json
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT p.document::json FROM outbox.cutover_readiness_proofs AS p WHERE p.proof_id = p_proof_id
$fn$;

COMMENT ON FUNCTION outbox.read_readiness_proof(uuid) IS
    'The CutoverReadinessProof@1 document (canonical text) of a proof, or NULL. SPEC R-PV-2, §13. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.read_readiness_proof(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.read_readiness_proof(uuid) TO outbox_auditor;

-- outbox.retire_projection_version(p_projection_name text, p_projection_version integer)
--   RETURNS void  (public, SPEC §11b R-PV-3, §13)
-- Purpose: retire a shadow or frozen version (state retired: the inbox refuses its receipts and
--   revisions, OB802; its live build, if any, is abandoned). Refused (OB809) while it is
--   targeted: it is active, a member of the active delivery set requires it, or an open delivery
--   (pending, leased, quarantined) is frozen to it; and while it is the rollback target inside
--   its window: frozen, and frozen less than kernel setting projection_rollback_window_seconds
--   ago (default 7 days; its last history row says when). Retiring a retired version: no-op.
-- Cost: the open-delivery check scans outbox_deliveries (no index by projection; rare call).
-- Locking: the version row FOR UPDATE (serialises with builds, freezes and cutovers of it).
-- SQLSTATEs: OB802 not registered; OB809 as above.
-- Caller: outbox_registrar; SECURITY DEFINER (no table privileges).
CREATE FUNCTION outbox.retire_projection_version(p_projection_name text, p_projection_version integer)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_state  text;
    v_frozen timestamptz;
    v_window bigint;
BEGIN
    SELECT v.state INTO v_state FROM outbox.projection_versions AS v
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'retire: projection version %@% is not registered', p_projection_name, p_projection_version
            USING ERRCODE = 'OB802';
    END IF;
    IF v_state = 'retired' THEN
        RETURN;
    END IF;
    IF v_state = 'active' THEN
        RAISE EXCEPTION 'retire: projection version %@% is active', p_projection_name, p_projection_version
            USING ERRCODE = 'OB809', HINT = 'cut over to another version first (outbox.cutover_projection)';
    END IF;
    IF EXISTS (SELECT 1 FROM outbox.delivery_set_versions AS s
                 JOIN outbox.delivery_set_members AS m
                   ON m.delivery_set_version = s.delivery_set_version AND m.definition_schema_version = s.definition_schema_version
                  AND m.digest_algorithm_version = s.digest_algorithm_version AND m.definition_digest = s.definition_digest
                WHERE s.status = 'active' AND m.projection_state = 'required'
                  AND m.projection_name = p_projection_name AND m.projection_version = p_projection_version)
       OR EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                   WHERE d.required_projection_name = p_projection_name AND d.required_projection_version = p_projection_version
                     AND d.status IN ('pending', 'leased', 'quarantined')) THEN
        RAISE EXCEPTION 'retire: projection version %@% is still targeted', p_projection_name, p_projection_version
            USING ERRCODE = 'OB809', DETAIL = 'the active delivery set or an open delivery (pending, leased, quarantined) targets it';
    END IF;
    IF v_state = 'frozen' THEN
        SELECT max(h.changed_at) INTO v_frozen FROM outbox.projection_version_history AS h
         WHERE h.projection_name = p_projection_name AND h.projection_version = p_projection_version AND h.state = 'frozen';
        SELECT k.value INTO v_window FROM outbox.kernel_settings AS k WHERE k.name = 'projection_rollback_window_seconds';
        IF pg_catalog.now() < v_frozen + pg_catalog.make_interval(secs => coalesce(v_window, 604800)) THEN
            RAISE EXCEPTION 'retire: projection version %@% is the rollback target inside its window', p_projection_name, p_projection_version
                USING ERRCODE = 'OB809',
                      DETAIL = pg_catalog.format('frozen at %s, window %s seconds (outbox.kernel_settings projection_rollback_window_seconds)', v_frozen, v_window);
        END IF;
    END IF;
    UPDATE outbox.projection_builds AS b SET state = 'abandoned', ended_at = pg_catalog.now()
     WHERE b.projection_name = p_projection_name AND b.projection_version = p_projection_version
       AND b.state IN ('building', 'frozen');
    UPDATE outbox.projection_versions AS v SET state = 'retired', live_build_id = NULL, live_build_token = NULL
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version;
END
$fn$;

COMMENT ON FUNCTION outbox.retire_projection_version(text, integer) IS
    'Retire a shadow or frozen projection version (its live build abandoned); OB809 while active, targeted by the active set or an open delivery, or the rollback target inside its window; OB802 not registered. SPEC R-PV-3, §13. Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.retire_projection_version(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retire_projection_version(text, integer) TO outbox_registrar;

-- outbox.drop_retired_projection(p_projection_name text, p_projection_version integer)
--   RETURNS TABLE(dropped_rows bigint)  (public, SPEC §11b R-PV-3, §13)
-- Purpose: delete the kernel's inbox rows of a RETIRED version: its revision gaps, its revision
--   progress and those of its receipts no acknowledgement names (a receipt whose ref an
--   acknowledged delivery, hot or archived, carries is evidence, R-RT-2, and stays). The
--   projection's own tables belong to its consumer and are not touched; nor are observation
--   receipts, the registry rows, the builds or the proofs. dropped_rows = rows deleted; a second
--   call drops what is left (0). The inbox guards admit these deletes only from this function's
--   statements, for a retired version (triggers/inbox_*.sql).
-- Locking: the version row FOR UPDATE (a retired version takes no inbox write: OB802).
-- SQLSTATEs: OB802 not registered, or not retired (never the active, a frozen or a shadow one).
-- Caller: outbox_registrar; SECURITY DEFINER (no table privileges).
CREATE FUNCTION outbox.drop_retired_projection(p_projection_name text, p_projection_version integer)
RETURNS TABLE (dropped_rows bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_state text;
    v_gaps  bigint;
    v_prog  bigint;
    v_rcpt  bigint;
BEGIN
    SELECT v.state INTO v_state FROM outbox.projection_versions AS v
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version
       FOR UPDATE;
    IF v_state IS DISTINCT FROM 'retired' THEN
        RAISE EXCEPTION 'drop: projection version %@% is %', p_projection_name, p_projection_version, coalesce(v_state, 'not registered')
            USING ERRCODE = 'OB802', HINT = 'retire it first: outbox.retire_projection_version';
    END IF;
    DELETE FROM inbox.inbox_revision_gaps AS g
     WHERE g.projection_name = p_projection_name AND g.projection_version = p_projection_version;
    GET DIAGNOSTICS v_gaps = ROW_COUNT;
    DELETE FROM inbox.inbox_revision_progress AS p
     WHERE p.projection_name = p_projection_name AND p.projection_version = p_projection_version;
    GET DIAGNOSTICS v_prog = ROW_COUNT;
    DELETE FROM inbox.inbox_receipts AS r
     WHERE r.projection_name = p_projection_name AND r.projection_version = p_projection_version
       AND NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                        WHERE d.destination = r.destination AND d.event_id = r.event_id
                          AND d.ack_receipt_ref = r.receipt_ref)
       AND NOT EXISTS (SELECT 1 FROM outbox.archived_deliveries AS a
                        WHERE a.destination = r.destination AND a.event_id = r.event_id
                          AND a.row_image->>'ack_receipt_ref' = r.receipt_ref);
    GET DIAGNOSTICS v_rcpt = ROW_COUNT;
    RETURN QUERY SELECT v_gaps + v_prog + v_rcpt;
END
$fn$;

COMMENT ON FUNCTION outbox.drop_retired_projection(text, integer) IS
    'Delete the inbox gaps, progress and unacknowledged receipts of a retired projection version: (dropped_rows); OB802 not retired. SPEC R-PV-3, §13. Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.drop_retired_projection(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.drop_retired_projection(text, integer) TO outbox_registrar;


-- The inbox guards admit the deletes of drop_retired_projection (their files changed).
DROP TRIGGER tg_inbox_receipts__append_only ON inbox.inbox_receipts;
DROP TRIGGER tg_inbox_receipts__append_only_truncate ON inbox.inbox_receipts;
DROP FUNCTION inbox.tg_inbox_receipts__append_only();
-- Receipts are append-only (SPEC R-SEC-3, R-RT-2): no UPDATE, DELETE or TRUNCATE, whoever the
-- role (the owner included). A receipt is corrected by never being wrong: insert-or-compare.
-- Exception (R-PV-3, migration 034): the DELETEs of outbox.drop_retired_projection for a retired
-- projection version (the context check below).
CREATE FUNCTION inbox.tg_inbox_receipts__append_only() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_context text;
    v_rest    text;
BEGIN
    -- R-PV-3: outbox.drop_retired_projection deletes the rows of a retired version. Admitted only
    -- when the statement below this trigger is a DELETE run directly by that function (a frame
    -- PostgreSQL writes; no session can forge it) and the row's version is retired.
    IF TG_OP = 'DELETE' THEN
        GET DIAGNOSTICS v_context = PG_CONTEXT;
        v_rest := pg_catalog.substr(v_context, pg_catalog.strpos(v_context, E'\n') + 1);
        IF pg_catalog.strpos(v_context, E'\n') > 0
           AND pg_catalog.starts_with(v_rest, 'SQL statement "DELETE FROM inbox.')
           AND pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ') > 0
           AND pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ')
               = pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function outbox.drop_retired_projection(text,integer) line ')
           AND EXISTS (SELECT 1 FROM outbox.projection_versions AS v
                        WHERE v.projection_name = OLD.projection_name AND v.projection_version = OLD.projection_version
                          AND v.state = 'retired') THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_receipts is not allowed', TG_OP
        USING ERRCODE = 'OB202',
              DETAIL = 'receipts are append-only (SPEC R-SEC-3); receipts referenced by acks are never deleted (R-RT-2)';
END
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_receipts__append_only() FROM PUBLIC;

CREATE TRIGGER tg_inbox_receipts__append_only BEFORE UPDATE OR DELETE ON inbox.inbox_receipts
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_receipts__append_only();
CREATE TRIGGER tg_inbox_receipts__append_only_truncate BEFORE TRUNCATE ON inbox.inbox_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_receipts__append_only();

DROP TRIGGER tg_inbox_revision_progress__monotonic ON inbox.inbox_revision_progress;
DROP TRIGGER tg_inbox_revision_progress__monotonic_truncate ON inbox.inbox_revision_progress;
DROP FUNCTION inbox.tg_inbox_revision_progress__monotonic();
-- Revision progress only moves forward (SPEC R-CO-3): an UPDATE must keep the key and raise
-- last_revision; DELETE and TRUNCATE are refused. A rebuilt projection uses a new version.
-- Exception (R-PV-3, migration 034): the DELETEs of outbox.drop_retired_projection for a retired
-- projection version (the context check below).
CREATE FUNCTION inbox.tg_inbox_revision_progress__monotonic() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_context text;
    v_rest    text;
BEGIN
    -- R-PV-3: outbox.drop_retired_projection deletes the rows of a retired version. Admitted only
    -- when the statement below this trigger is a DELETE run directly by that function (a frame
    -- PostgreSQL writes; no session can forge it) and the row's version is retired.
    IF TG_OP = 'DELETE' THEN
        GET DIAGNOSTICS v_context = PG_CONTEXT;
        v_rest := pg_catalog.substr(v_context, pg_catalog.strpos(v_context, E'\n') + 1);
        IF pg_catalog.strpos(v_context, E'\n') > 0
           AND pg_catalog.starts_with(v_rest, 'SQL statement "DELETE FROM inbox.')
           AND pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ') > 0
           AND pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ')
               = pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function outbox.drop_retired_projection(text,integer) line ')
           AND EXISTS (SELECT 1 FROM outbox.projection_versions AS v
                        WHERE v.projection_name = OLD.projection_name AND v.projection_version = OLD.projection_version
                          AND v.state = 'retired') THEN
            RETURN OLD;
        END IF;
    END IF;
    IF TG_OP = 'UPDATE'
       AND (NEW.consumer_name, NEW.projection_name, NEW.projection_version, NEW.aggregate_id)
           IS NOT DISTINCT FROM (OLD.consumer_name, OLD.projection_name, OLD.projection_version, OLD.aggregate_id)
       AND NEW.last_revision > OLD.last_revision THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_revision_progress is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'revision progress only increases, through inbox.observe_revision (SPEC R-CO-3)';
END
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_revision_progress__monotonic() FROM PUBLIC;

CREATE TRIGGER tg_inbox_revision_progress__monotonic BEFORE UPDATE OR DELETE ON inbox.inbox_revision_progress
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_revision_progress__monotonic();
CREATE TRIGGER tg_inbox_revision_progress__monotonic_truncate BEFORE TRUNCATE ON inbox.inbox_revision_progress
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_revision_progress__monotonic();

DROP TRIGGER tg_inbox_revision_gaps__closed_immutable ON inbox.inbox_revision_gaps;
DROP TRIGGER tg_inbox_revision_gaps__closed_immutable_truncate ON inbox.inbox_revision_gaps;
DROP FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();
-- Gap records are kept (SPEC R-CO-3, R-OP-2): an open gap may only see later observations
-- (seen_revision up, last_seen_at, observation_count) and be closed once; a closed gap never
-- changes; no gap is deleted or truncated.
-- Exception (R-PV-3, migration 034): the DELETEs of outbox.drop_retired_projection for a retired
-- projection version (the context check below).
CREATE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_context text;
    v_rest    text;
BEGIN
    -- R-PV-3: outbox.drop_retired_projection deletes the rows of a retired version. Admitted only
    -- when the statement below this trigger is a DELETE run directly by that function (a frame
    -- PostgreSQL writes; no session can forge it) and the row's version is retired.
    IF TG_OP = 'DELETE' THEN
        GET DIAGNOSTICS v_context = PG_CONTEXT;
        v_rest := pg_catalog.substr(v_context, pg_catalog.strpos(v_context, E'\n') + 1);
        IF pg_catalog.strpos(v_context, E'\n') > 0
           AND pg_catalog.starts_with(v_rest, 'SQL statement "DELETE FROM inbox.')
           AND pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ') > 0
           AND pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ')
               = pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function outbox.drop_retired_projection(text,integer) line ')
           AND EXISTS (SELECT 1 FROM outbox.projection_versions AS v
                        WHERE v.projection_name = OLD.projection_name AND v.projection_version = OLD.projection_version
                          AND v.state = 'retired') THEN
            RETURN OLD;
        END IF;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.closed_at IS NULL
       AND (NEW.consumer_name, NEW.projection_name, NEW.projection_version, NEW.aggregate_id,
            NEW.expected_revision, NEW.first_seen_at)
           IS NOT DISTINCT FROM
           (OLD.consumer_name, OLD.projection_name, OLD.projection_version, OLD.aggregate_id,
            OLD.expected_revision, OLD.first_seen_at)
       AND NEW.seen_revision >= OLD.seen_revision
       AND NEW.observation_count >= OLD.observation_count THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_revision_gaps is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'gap records are kept; only an open gap changes, through inbox.observe_revision (SPEC R-CO-3)';
END
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable() FROM PUBLIC;

CREATE TRIGGER tg_inbox_revision_gaps__closed_immutable BEFORE UPDATE OR DELETE ON inbox.inbox_revision_gaps
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();
CREATE TRIGGER tg_inbox_revision_gaps__closed_immutable_truncate BEFORE TRUNCATE ON inbox.inbox_revision_gaps
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();


RESET ROLE;
