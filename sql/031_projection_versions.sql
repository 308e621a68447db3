-- Projection versions, slice R-PV-1: the version registry and shadow rebuilds (SPEC §11b, §13
-- "Projection versions"; codes OB801, OB802, OB001; docs/projection-versions.md).
--   * outbox.projection_versions: one row per (projection_name, projection_version) with its
--     semantic definition digest (or 'unknown'), state active | shadow | frozen | retired and
--     the live shadow build's id and token; one active version per projection (partial unique
--     index); identity immutable, append-only history in outbox.projection_version_history
--     (triggers/projection_versions__guarded.sql);
--   * outbox.projection_builds (a shadow build: state building | abandoned, token, started_at,
--     cursor) and outbox.projection_build_sources (the per-build ledger of handed-out sources,
--     append-only);
--   * outbox.register_projection_version (outbox_registrar), outbox.start_shadow_build and
--     outbox.claim_rebuild_sources (new role outbox_projector);
--   * inbox.record_receipt and inbox.observe_revision gain a trailing p_build_token uuid
--     DEFAULT NULL and check the version (old signatures dropped, every existing caller keeps
--     working: the new argument is optional, and active versions take no token);
--   * outbox.event_source gains a trailing created_at column (the rebuild order), and
--     outbox.archived_events a BRIN index on created_at (the rebuild's range scan);
--   * every projection version the active delivery set's members target now is registered as
--     active with semantic digest 'unknown' (several versions of one projection: the highest
--     active, the others frozen), and a later activation registers the targets of projections
--     that have no version yet (triggers/delivery_set_versions__register_projections.sql).
-- Applied to a running database: new tables, functions and triggers; the two inbox functions
-- are dropped and recreated in this transaction (a consumer call waits for the migration's
-- commit, none fails); CREATE INDEX on outbox.archived_events holds a SHARE lock on it while it
-- builds (archive runs wait); the view is replaced in place (its grants stay).
-- One NOLOGIN group role whose name is the template argument (a migration includes this file with
-- the role name as the template data; SPEC R-SEC-1). Roles are cluster-wide: created idempotently, tolerant of a parallel template
-- build creating the same role at the same moment (duplicate_object), as roles/create_roles.sql
-- does for the first six roles. Operators grant it to login users.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_projector') THEN
        BEGIN
            CREATE ROLE outbox_projector NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;


SET LOCAL ROLE outbox_owner;

GRANT USAGE ON SCHEMA outbox TO outbox_projector;

CREATE TABLE outbox.projection_versions (
    projection_name            text NOT NULL CHECK (projection_name ~ '^[a-z0-9][a-z0-9._@-]*$' AND length(projection_name) <= 200),
    projection_version         integer NOT NULL CHECK (projection_version > 0),
    semantic_definition_sha256 text NOT NULL CHECK (semantic_definition_sha256 ~ '^[0-9a-f]{64}$' OR semantic_definition_sha256 = 'unknown'),
    state                      text NOT NULL CHECK (state IN ('active', 'shadow', 'frozen', 'retired')),
    live_build_id              uuid,
    live_build_token           uuid,
    registered_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection_name, projection_version),
    CHECK ((live_build_id IS NULL) = (live_build_token IS NULL)),
    CHECK (live_build_token IS NULL OR state = 'shadow')
);
-- exactly one active version per projection (SPEC §11b)
CREATE UNIQUE INDEX projection_versions_one_active ON outbox.projection_versions (projection_name) WHERE state = 'active';
COMMENT ON TABLE outbox.projection_versions IS
    'Projection versions (SPEC R-PV-1): semantic digest, state active|shadow|frozen|retired, the live shadow build and its token; changed only by the outbox projection functions.';

CREATE TABLE outbox.projection_version_history (
    history_id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    state              text NOT NULL,
    changed_at         timestamptz NOT NULL DEFAULT now(),
    changed_by         text NOT NULL,
    FOREIGN KEY (projection_name, projection_version) REFERENCES outbox.projection_versions
);
COMMENT ON TABLE outbox.projection_version_history IS
    'Append-only: one row per registration and state change of a projection version (SPEC R-PV-1), written by a trigger.';

CREATE TABLE outbox.projection_builds (
    build_id           uuid PRIMARY KEY,
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    build_token        uuid NOT NULL,
    state              text NOT NULL CHECK (state IN ('building', 'abandoned')),
    started_at         timestamptz NOT NULL DEFAULT now(),
    started_by         text NOT NULL,
    ended_at           timestamptz,
    cursor_at          timestamptz,
    sources_claimed    bigint NOT NULL DEFAULT 0 CHECK (sources_claimed >= 0),
    FOREIGN KEY (projection_name, projection_version) REFERENCES outbox.projection_versions,
    CHECK ((state = 'building') = (ended_at IS NULL))
);
-- one live build per version
CREATE UNIQUE INDEX projection_builds_one_live ON outbox.projection_builds (projection_name, projection_version) WHERE state = 'building';
COMMENT ON TABLE outbox.projection_builds IS
    'Shadow builds of projection versions (SPEC R-PV-1): state building|abandoned, fencing token, source cursor; changed only by start_shadow_build/claim_rebuild_sources.';

CREATE TABLE outbox.projection_build_sources (
    build_id    uuid NOT NULL REFERENCES outbox.projection_builds (build_id),
    source_kind text NOT NULL CHECK (source_kind IN ('event', 'observation')),
    source_id   uuid NOT NULL,
    source_at   timestamptz NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (build_id, source_kind, source_id)
);
COMMENT ON TABLE outbox.projection_build_sources IS
    'Append-only ledger of the sources claim_rebuild_sources handed to a build, once each (SPEC R-PV-1).';

-- Guards of the projection version registry (SPEC §11b R-PV-1; OB202 like the other registries):
--   * outbox.projection_versions: the identity (projection_name, projection_version), the
--     semantic definition digest and registered_at never change; state, live_build_id and
--     live_build_token move only through the outbox functions (no role but the owner has table
--     privileges); no DELETE, no TRUNCATE. Every insert and state change writes one
--     outbox.projection_version_history row (tg_projection_versions__history).
--   * outbox.projection_version_history and outbox.projection_build_sources: append-only.
--   * outbox.projection_builds: build_id, the version, started_at and started_by never change;
--     an abandoned build is terminal (its token is dead for good); no DELETE, no TRUNCATE.
-- Caller: trigger functions, granted to nobody.
CREATE FUNCTION outbox.tg_projection_registry__guarded() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- nested IFs: an expression naming NEW's columns is prepared only for the table that has them
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'projection_versions' THEN
        IF (NEW.projection_name, NEW.projection_version, NEW.semantic_definition_sha256, NEW.registered_at)
           IS NOT DISTINCT FROM
           (OLD.projection_name, OLD.projection_version, OLD.semantic_definition_sha256, OLD.registered_at) THEN
            RETURN NEW;
        END IF;
    ELSIF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'projection_builds' THEN
        IF (NEW.build_id, NEW.projection_name, NEW.projection_version, NEW.started_at, NEW.started_by)
           IS NOT DISTINCT FROM
           (OLD.build_id, OLD.projection_name, OLD.projection_version, OLD.started_at, OLD.started_by)
           AND OLD.state <> 'abandoned' THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on %.% is not allowed', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'projection version registry rows keep their identity; state moves only through the outbox projection functions (SPEC R-PV-1)';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_projection_registry__guarded() FROM PUBLIC;

-- One history row per registration and per state change of a projection version.
CREATE FUNCTION outbox.tg_projection_versions__history() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state THEN
        INSERT INTO outbox.projection_version_history (projection_name, projection_version, state, changed_by)
        VALUES (NEW.projection_name, NEW.projection_version, NEW.state, session_user);
    END IF;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_projection_versions__history() FROM PUBLIC;

CREATE TRIGGER tg_projection_versions__guarded BEFORE UPDATE OR DELETE ON outbox.projection_versions
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_projection_versions__no_truncate BEFORE TRUNCATE ON outbox.projection_versions
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_projection_versions__history AFTER INSERT OR UPDATE OF state ON outbox.projection_versions
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_versions__history();
CREATE TRIGGER tg_projection_version_history__append_only BEFORE UPDATE OR DELETE ON outbox.projection_version_history
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_projection_version_history__no_truncate BEFORE TRUNCATE ON outbox.projection_version_history
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_projection_builds__guarded BEFORE UPDATE OR DELETE ON outbox.projection_builds
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_projection_builds__no_truncate BEFORE TRUNCATE ON outbox.projection_builds
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_projection_build_sources__append_only BEFORE UPDATE OR DELETE ON outbox.projection_build_sources
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_projection_build_sources__no_truncate BEFORE TRUNCATE ON outbox.projection_build_sources
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();

-- R-PV-1: a delivery-set activation that introduces a projection target registers it. When
-- outbox.activate_delivery_set makes a definition active, every (projection_name,
-- projection_version) its members require whose projection has NO registered version yet is
-- registered with semantic digest 'unknown': the highest such version of a projection as
-- 'active', any lower one the same members also target as 'frozen' (both take receipts without
-- a build token, like every version live deliveries are frozen to). A projection that already
-- has versions is left alone: retargeting it to another version belongs to
-- outbox.cutover_projection (R-PV-2; activate_delivery_set refuses it outside, OB808).
-- Locking: runs inside activate_delivery_set (SHARE ROW EXCLUSIVE on delivery_set_versions);
--   the insert takes the projection_versions primary key (ON CONFLICT DO NOTHING).
-- Caller: trigger function, granted to nobody.
CREATE FUNCTION outbox.tg_delivery_set_versions__register_projections() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    INSERT INTO outbox.projection_versions (projection_name, projection_version, semantic_definition_sha256, state)
    SELECT t.projection_name, t.projection_version, 'unknown',
           CASE WHEN t.projection_version = max(t.projection_version) OVER (PARTITION BY t.projection_name)
                THEN 'active' ELSE 'frozen' END
      FROM (SELECT DISTINCT m.projection_name, m.projection_version
              FROM outbox.delivery_set_members AS m
             WHERE m.delivery_set_version = NEW.delivery_set_version
               AND m.definition_schema_version = NEW.definition_schema_version
               AND m.digest_algorithm_version = NEW.digest_algorithm_version
               AND m.definition_digest = NEW.definition_digest
               AND m.projection_state = 'required') AS t
     WHERE NOT EXISTS (SELECT 1 FROM outbox.projection_versions AS v WHERE v.projection_name = t.projection_name)
     ORDER BY t.projection_name, t.projection_version
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_delivery_set_versions__register_projections() FROM PUBLIC;

CREATE TRIGGER tg_delivery_set_versions__register_projections
    AFTER UPDATE OF status ON outbox.delivery_set_versions
    FOR EACH ROW WHEN (NEW.status = 'active' AND OLD.status IS DISTINCT FROM 'active')
    EXECUTE FUNCTION outbox.tg_delivery_set_versions__register_projections();


-- The rebuild's order key for events: their append time, as a trailing column of the view
-- (CREATE OR REPLACE keeps the existing columns and grants).
CREATE OR REPLACE VIEW outbox.event_source AS
SELECT e.event_id, e.event_type, e.schema_version, e.delivery_set_version,
       e.delivery_set_definition_schema_version AS definition_schema_version,
       e.delivery_set_definition_digest_algorithm_version AS digest_algorithm_version,
       e.delivery_set_definition_digest AS definition_digest,
       -- the envelope as outbox._event_envelope builds it (a view calls functions with the
       -- reader's rights, and that helper is private)
       pg_catalog.jsonb_build_object(
           'eventId', e.event_id::text, 'eventType', e.event_type, 'eventSchemaVersion', e.schema_version,
           'aggregateId', e.aggregate_id, 'aggregateRevision', e.aggregate_revision,
           'tenant', pg_catalog.jsonb_build_object('tenantKind', e.tenant_kind, 'tenantId', e.tenant_id,
                                                   'workspaceId', e.workspace_id)
                     || CASE WHEN e.project_id IS NULL THEN '{}'::jsonb
                             ELSE pg_catalog.jsonb_build_object('projectId', e.project_id) END,
           'occurredAt', pg_catalog.to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'payload', e.event_payload)
       || CASE WHEN e.correlation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('correlationId', e.correlation_id) END
       || CASE WHEN e.causation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('causationId', e.causation_id) END
       || CASE WHEN e.operation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('operationId', e.operation_id) END
           AS envelope,
       e.event_envelope_sha256, 'hot'::text AS location, e.created_at
  FROM outbox.outbox_events e
UNION ALL
SELECT a.event_id, a.event_type, a.schema_version, a.delivery_set_version,
       a.delivery_set_definition_schema_version, a.delivery_set_definition_digest_algorithm_version,
       a.delivery_set_definition_digest, a.event_envelope_canonical::jsonb, a.event_envelope_sha256, 'archive'::text,
       a.created_at
  FROM outbox.archived_events a;
COMMENT ON VIEW outbox.event_source IS
    'Every event, hot or archived, with its frozen quartet, envelope, digest and append time; location hot|archive (SPEC R-RT-1, R-PV-1, §13). Read-only.';
CREATE INDEX archived_events_created_brin ON outbox.archived_events USING brin (created_at);

-- R-PV-1: the versions the active delivery set targets when this is installed are active (their
-- semantic definition was never recorded: 'unknown'). No active set: nothing is registered.
INSERT INTO outbox.projection_versions (projection_name, projection_version, semantic_definition_sha256, state)
SELECT t.projection_name, t.projection_version, 'unknown',
       CASE WHEN t.projection_version = max(t.projection_version) OVER (PARTITION BY t.projection_name)
            THEN 'active' ELSE 'frozen' END
  FROM (SELECT DISTINCT m.projection_name, m.projection_version
          FROM outbox.delivery_set_versions AS v
          JOIN outbox.delivery_set_members AS m
            ON m.delivery_set_version = v.delivery_set_version
           AND m.definition_schema_version = v.definition_schema_version
           AND m.digest_algorithm_version = v.digest_algorithm_version
           AND m.definition_digest = v.definition_digest
         WHERE v.status = 'active' AND m.projection_state = 'required') AS t
 ORDER BY t.projection_name, t.projection_version;

-- outbox.register_projection_version(p_projection_name text, p_projection_version integer,
--   p_semantic_definition_sha256 text) RETURNS text  (public, SPEC §11b R-PV-1, §13)
-- Purpose: register a version of a projection, insert-or-compare: 'registered' (the first version
--   of a projection becomes active, every later one shadow) or 'existing' (same semantic digest;
--   nothing written). The digest is 64 lower-case hex digits or 'unknown'.
-- Locking: the primary key serialises registrations of one version; the partial unique index
--   projection_versions_one_active keeps one active version (a concurrent first registration of
--   another version fails with 23505: retry it and it registers as shadow).
-- SQLSTATEs: 22023 projection name not a literal, version < 1, digest not 64 hex digits nor
--   'unknown'; OB801 the version is registered with another semantic definition digest.
-- Design notes: docs/projection-versions.md#outboxregister_projection_version
-- Caller: outbox_registrar, SECURITY DEFINER: it has no table grants.
CREATE FUNCTION outbox.register_projection_version(p_projection_name text, p_projection_version integer,
                                                   p_semantic_definition_sha256 text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_existing text;
BEGIN
    IF p_projection_name IS NULL OR p_projection_name !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_projection_name) > 200
       OR p_projection_version IS NULL OR p_projection_version < 1 THEN
        RAISE EXCEPTION 'projection version: invalid projection key'
            USING ERRCODE = '22023', DETAIL = 'projection_name must match ^[a-z0-9][a-z0-9._@-]*$ (at most 200 characters) and projection_version >= 1';
    END IF;
    IF p_semantic_definition_sha256 IS NULL
       OR (p_semantic_definition_sha256 !~ '^[0-9a-f]{64}$' AND p_semantic_definition_sha256 <> 'unknown') THEN
        RAISE EXCEPTION 'projection version: invalid semantic definition digest'
            USING ERRCODE = '22023', DETAIL = 'semantic_definition_sha256 is 64 lower-case hex digits or ''unknown''';
    END IF;

    INSERT INTO outbox.projection_versions AS v (projection_name, projection_version, semantic_definition_sha256, state)
    VALUES (p_projection_name, p_projection_version, p_semantic_definition_sha256,
            CASE WHEN EXISTS (SELECT 1 FROM outbox.projection_versions AS o WHERE o.projection_name = p_projection_name)
                 THEN 'shadow' ELSE 'active' END)
    ON CONFLICT (projection_name, projection_version) DO NOTHING;
    IF FOUND THEN
        RETURN 'registered';
    END IF;

    SELECT v.semantic_definition_sha256 INTO STRICT v_existing
      FROM outbox.projection_versions AS v
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version;
    IF v_existing <> p_semantic_definition_sha256 THEN
        RAISE EXCEPTION 'projection version conflict: %@% is registered with another semantic definition', p_projection_name, p_projection_version
            USING ERRCODE = 'OB801',
                  DETAIL = pg_catalog.format('registered %s, now %s', v_existing, p_semantic_definition_sha256),
                  HINT = 'a changed semantic definition is a new projection version (SPEC R-PV-1)';
    END IF;
    RETURN 'existing';
END
$fn$;

COMMENT ON FUNCTION outbox.register_projection_version(text, integer, text) IS
    'Register a projection version, insert-or-compare: registered (first version of a projection: active, later ones: shadow) | existing; OB801 another semantic digest for the same version; 22023 invalid key or digest. SPEC R-PV-1, §13. Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.register_projection_version(text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_projection_version(text, integer, text) TO outbox_registrar;

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

-- inbox._inbox_check_version(p_projection_name text, p_projection_version integer, p_build_token uuid)
--   RETURNS void  (private, R-PV-1)
-- The projection-version check of inbox.record_receipt and inbox.observe_revision, called only
-- off their hot path. No projection: a token is 22023. A projection with no registered version
-- in this database: accepted (a consumer's own database). Unregistered or retired: OB802. Active
-- or frozen: no token (one given: OB001). Shadow: the live build's token is required (missing or
-- stale: OB001); the version row then stays FOR SHARE until the caller commits, so a token
-- rotation (start_shadow_build, FOR UPDATE) never overlaps a write under the old token.
-- SQLSTATEs: 22023, OB802, OB001. Caller: record_receipt, observe_revision; granted to nobody.
-- Design notes: docs/projection-versions.md#inbox_inbox_check_version
CREATE FUNCTION inbox._inbox_check_version(p_projection_name text, p_projection_version integer, p_build_token uuid)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_state text;
    v_live  uuid;
BEGIN
    IF coalesce(p_projection_name, '') = '' THEN
        IF p_build_token IS NOT NULL THEN
            RAISE EXCEPTION 'inbox: a build token without a projection'
                USING ERRCODE = '22023', DETAIL = 'a build token names a shadow projection version; a consumer without projection passes none';
        END IF;
        RETURN;
    END IF;
    SELECT v.state, v.live_build_token INTO v_state, v_live
      FROM outbox.projection_versions AS v
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version
       FOR SHARE;
    IF NOT FOUND AND p_build_token IS NULL
       AND NOT EXISTS (SELECT 1 FROM outbox.projection_versions AS v WHERE v.projection_name = p_projection_name) THEN
        -- an unversioned projection: no version of it is registered in this database (a
        -- consumer's inbox in a database of its own, where no delivery set is active). Nothing
        -- to check against, so receipts are accepted as before versions existed; cutover is for
        -- projections whose registry shares the database (SPEC §11b, OB810 otherwise).
        RETURN;
    END IF;
    IF NOT FOUND OR v_state = 'retired' THEN
        RAISE EXCEPTION 'inbox: projection version %@% is %', p_projection_name, p_projection_version,
                        CASE WHEN v_state IS NULL THEN 'not registered' ELSE v_state END
            USING ERRCODE = 'OB802',
                  HINT = 'register it with outbox.register_projection_version (SPEC R-PV-1)';
    END IF;
    IF v_state IN ('active', 'frozen') THEN
        IF p_build_token IS NOT NULL THEN
            RAISE EXCEPTION 'fencing rejected: projection version %@% is % and takes no build token', p_projection_name, p_projection_version, v_state
                USING ERRCODE = 'OB001', DETAIL = 'build tokens fence shadow builds only; this build is over';
        END IF;
        RETURN;
    END IF;
    IF p_build_token IS NULL OR v_live IS DISTINCT FROM p_build_token THEN
        RAISE EXCEPTION 'fencing rejected: shadow projection version %@% needs its live build token', p_projection_name, p_projection_version
            USING ERRCODE = 'OB001',
                  DETAIL = CASE WHEN p_build_token IS NULL THEN 'no build token given'
                                WHEN v_live IS NULL THEN 'the version has no live build'
                                ELSE 'the token is stale: a later start_shadow_build rotated it' END,
                  HINT = 'pass build_token of outbox.start_shadow_build (SPEC R-PV-1)';
    END IF;
END
$fn$;

COMMENT ON FUNCTION inbox._inbox_check_version(text, integer, uuid) IS
    'Private: projection version check of the inbox functions (OB802 unregistered/retired, OB001 missing/stale shadow token or a token for an active/frozen version, 22023 token without projection); locks a shadow version FOR SHARE. SPEC R-PV-1.';
REVOKE ALL ON FUNCTION inbox._inbox_check_version(text, integer, uuid) FROM PUBLIC;


-- The inbox functions gain the optional build token (docs/migrations.md rule 4: the files render
-- the new signature only with this data).
DROP FUNCTION inbox.record_receipt(text, text, integer, json, json, text);
-- inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_envelope json, p_receipt json, p_receipt_digest_candidate text DEFAULT NULL,
--   p_build_token uuid DEFAULT NULL) RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text)
-- (public, SPEC R-CO-1, R-AK-1a, D-2, R-PV-1, §13; how it works: docs/contract.md "The inbox")
-- Purpose: insert-or-compare of a content-addressed consumer receipt inside the consumer's
--   transaction: 'new' (inserted) or 'existing' (the first receipt's ref and digest). The envelope
--   digest is the database's own; the receipt must pass the closed-receipt rule shared with the
--   producer (outbox._receipt_problem) and agree with the call, the envelope and the registry.
-- SQLSTATEs: 42501 caller not bound to consumer_name; OB301 same event id, other envelope digest;
--   OB002 receipt invalid, not closed or inconsistent (or a candidate not the receipt's, or a ref
--   naming another receipt); OB105 envelope unusable; OB201 not canonicalizable; 22023 bad key;
--   OB802 projection version unregistered/retired; OB001 missing/stale build token.
-- Caller: outbox_consumer (its login role); SECURITY DEFINER: it has no table grants.
CREATE FUNCTION inbox.record_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                     p_event_envelope json, p_receipt json,
                                     p_receipt_digest_candidate text DEFAULT NULL,
                                     p_build_token uuid DEFAULT NULL)
RETURNS TABLE (outcome text, receipt_ref text, receipt_digest text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
    v_env                jsonb;
    v_env_sha            text;
    v_event_id           uuid;
    v_rtext              text;
    v_doc                jsonb;
    v_kind               outbox.receipt_kinds;
    v_p                  text;
    v_dest_consumer      text;
    v_dest_kind          text;
    v_version_state      text;
    v_member             text;
    v_problem            text;
    v_time_text          text;
    v_time               timestamptz;
    v_ref                text;
    v_digest             text;
    v_expected           text;
    v_cut                text;
    v_complete           boolean;
    v_text               text;
    v_inserted           boolean;
    v_existing           inbox.inbox_receipts;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role

    -- The envelope digest (D-2): sha256 of the bytes when they are canonical, else canonicalized
    -- here (OB201 if not canonicalizable). Either way jcs-sha256-v1 of the envelope.
    IF p_event_envelope IS NULL OR pg_catalog.json_typeof(p_event_envelope) <> 'object' THEN
        RAISE EXCEPTION 'envelope invalid: not a JSON object' USING ERRCODE = 'OB105';
    END IF;
    -- R-SEC-5: bounded inputs (an envelope the kernel appended is at most max_payload_bytes plus
    -- the generated eventId/occurredAt; a receipt is a small closed document).
    IF pg_catalog.octet_length(p_event_envelope::text)
       > coalesce((SELECT k.value FROM outbox.kernel_settings AS k WHERE k.name = 'max_payload_bytes'), 1048576) + 1024 THEN
        RAISE EXCEPTION 'envelope invalid: larger than max_payload_bytes'
            USING ERRCODE = 'OB105', DETAIL = 'the envelope is larger than any event append_event accepts (outbox.kernel_settings max_payload_bytes)';
    END IF;
    IF p_receipt IS NOT NULL AND pg_catalog.octet_length(p_receipt::text) > 65536 THEN
        RAISE EXCEPTION 'receipt rejected: larger than 65536 bytes' USING ERRCODE = 'OB002';
    END IF;
    IF outbox._jcs_text_problem(p_event_envelope::text) IS NULL THEN
        v_env_sha := outbox._sha256_hex(p_event_envelope::text);
    ELSE
        v_env_sha := outbox.jcs_sha256(p_event_envelope);
    END IF;
    v_env := p_event_envelope::jsonb;
    IF pg_catalog.jsonb_typeof(v_env -> 'eventId') IS DISTINCT FROM 'string'
       OR (v_env ->> 'eventId') !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'envelope invalid: eventId'
            USING ERRCODE = 'OB105', DETAIL = 'eventId must be a lower-case UUID string';
    END IF;
    v_event_id := (v_env ->> 'eventId')::uuid;
    IF pg_catalog.jsonb_typeof(v_env -> 'eventType') IS DISTINCT FROM 'string'
       OR pg_catalog.jsonb_typeof(v_env -> 'eventSchemaVersion') IS DISTINCT FROM 'string'
       OR pg_catalog.jsonb_typeof(v_env -> 'aggregateId') IS DISTINCT FROM 'string'
       OR (v_env ->> 'aggregateId') = ''
       OR pg_catalog.jsonb_typeof(v_env -> 'aggregateRevision') IS DISTINCT FROM 'number'
       OR (v_env ->> 'aggregateRevision') !~ '^[1-9][0-9]{0,15}$' THEN
        RAISE EXCEPTION 'envelope invalid: identity fields'
            USING ERRCODE = 'OB105',
                  DETAIL = format('event %s: eventType, eventSchemaVersion, aggregateId (strings) and aggregateRevision (integer > 0) are required', v_event_id);
    END IF;

    -- The receipt document and its canonical text (OB201 on duplicate keys or unsafe numbers).
    IF p_receipt IS NULL OR pg_catalog.json_typeof(p_receipt) <> 'object' THEN
        RAISE EXCEPTION 'receipt rejected: not a JSON object' USING ERRCODE = 'OB002';
    END IF;
    IF p_receipt_digest_candidate IS NOT NULL AND outbox._jcs_text_problem(p_receipt::text) IS NULL THEN
        v_rtext := p_receipt::text;
    ELSE
        v_rtext := outbox.jcs_canonicalize(p_receipt);
    END IF;
    v_doc := p_receipt::jsonb;
    v_kind := inbox._inbox_receipt_kind(v_doc);
    v_p := v_kind.field_prefix;

    -- The closed-receipt rule (R-AK-1a), the same for the producer and the inbox: members, types,
    -- required members, integer form, schema version, digest algorithms.
    v_problem := outbox._receipt_problem(v_kind, p_receipt, v_doc);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'receipt rejected: not a closed % receipt', v_kind.receipt_kind
            USING ERRCODE = 'OB002', DETAIL = v_problem, HINT = 'SPEC R-AK-1a: receipts are closed documents (outbox._receipt_problem)';
    END IF;
    IF v_doc -> 'consumerName' IS DISTINCT FROM pg_catalog.to_jsonb(p_consumer_name) THEN
        RAISE EXCEPTION 'receipt rejected: consumerName'
            USING ERRCODE = 'OB002', DETAIL = format('the receipt must name consumer %s', p_consumer_name);
    END IF;
    IF pg_catalog.jsonb_typeof(v_doc -> 'destination') IS DISTINCT FROM 'string'
       OR (v_doc ->> 'destination') !~ '^[a-z0-9][a-z0-9._@-]*$' THEN
        RAISE EXCEPTION 'receipt rejected: destination' USING ERRCODE = 'OB002', DETAIL = 'destination must be a literal (SPEC D-4)';
    END IF;
    -- A destination registered in this database must map to this consumer and receipt kind; the
    -- same statement reads the projection version's state (R-PV-1: one probe, no extra statement).
    SELECT d.consumer_name, d.receipt_kind, pv.state
      INTO v_dest_consumer, v_dest_kind, v_version_state
      FROM (SELECT) AS one
      LEFT JOIN outbox.delivery_destinations AS d ON d.destination = v_doc ->> 'destination'
      LEFT JOIN outbox.projection_versions AS pv
             ON pv.projection_name = v_projection_name AND pv.projection_version = v_projection_version;
    IF v_dest_consumer IS NOT NULL AND (v_dest_consumer <> p_consumer_name OR v_dest_kind <> v_kind.receipt_kind) THEN
        RAISE EXCEPTION 'receipt rejected: destination %', v_doc ->> 'destination'
            USING ERRCODE = 'OB002',
                  DETAIL = format('destination %s is registered for consumer %s with receipt kind %s',
                                  v_doc ->> 'destination', v_dest_consumer, v_dest_kind);
    END IF;
    IF v_doc -> 'eventId' IS DISTINCT FROM v_env -> 'eventId' THEN
        RAISE EXCEPTION 'receipt rejected: eventId'
            USING ERRCODE = 'OB002', DETAIL = format('the receipt must name event %s', v_event_id);
    END IF;
    IF v_doc -> 'eventEnvelopeSha256' IS DISTINCT FROM pg_catalog.to_jsonb(v_env_sha) THEN
        RAISE EXCEPTION 'receipt rejected: eventEnvelopeSha256'
            USING ERRCODE = 'OB002',
                  DETAIL = format('event %s: the receipt''s envelope digest differs from the digest the database computes (%s)', v_event_id, v_env_sha);
    END IF;

    -- Projection coordinates: the call's, never the receipt's own claim.
    IF v_projection_name <> '' OR v_kind.requires_projection THEN
        IF v_projection_name = '' THEN
            RAISE EXCEPTION 'receipt rejected: % receipts need a projection', v_kind.receipt_kind
                USING ERRCODE = 'OB002', DETAIL = 'call record_receipt with the projection name and version the consumer builds';
        END IF;
        IF v_doc -> 'projectionName' IS DISTINCT FROM pg_catalog.to_jsonb(v_projection_name)
           OR v_doc -> 'projectionVersion' IS DISTINCT FROM pg_catalog.to_jsonb(v_projection_version) THEN
            RAISE EXCEPTION 'receipt rejected: projection'
                USING ERRCODE = 'OB002', DETAIL = format('the receipt must name projection %s version %s', v_projection_name, v_projection_version);
        END IF;
    ELSIF v_doc ? 'projectionName' OR v_doc ? 'projectionVersion' THEN
        RAISE EXCEPTION 'receipt rejected: projection fields without a projection'
            USING ERRCODE = 'OB002', DETAIL = 'a consumer without projection records projection_name = '''' and projection_version = 0';
    END IF;
    IF (v_doc ? 'eventType' AND v_doc -> 'eventType' IS DISTINCT FROM v_env -> 'eventType')
       OR (v_doc ? 'eventSchemaVersion' AND v_doc -> 'eventSchemaVersion' IS DISTINCT FROM v_env -> 'eventSchemaVersion') THEN
        RAISE EXCEPTION 'receipt rejected: eventType/eventSchemaVersion'
            USING ERRCODE = 'OB002', DETAIL = format('event %s: the receipt''s event type/schema differ from the envelope''s', v_event_id);
    END IF;

    -- The time field.
    v_time_text := v_doc ->> v_kind.time_field;
    IF pg_catalog.jsonb_typeof(v_doc -> v_kind.time_field) IS DISTINCT FROM 'string'
       OR v_time_text !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$' THEN
        RAISE EXCEPTION 'receipt rejected: %', v_kind.time_field
            USING ERRCODE = 'OB002', DETAIL = 'a UTC RFC 3339 time with exactly six fractional digits and Z';
    END IF;
    BEGIN
        v_time := v_time_text::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        RAISE EXCEPTION 'receipt rejected: %', v_kind.time_field
            USING ERRCODE = 'OB002', DETAIL = 'not a valid time';
    END;

    -- Ref: the consumer's (checked here), or the deterministic default (assigned below).
    IF v_doc ? (v_p || 'Ref') THEN
        IF pg_catalog.jsonb_typeof(v_doc -> (v_p || 'Ref')) IS DISTINCT FROM 'string'
           OR (v_doc ->> (v_p || 'Ref')) = '' OR pg_catalog.length(v_doc ->> (v_p || 'Ref')) > 500 THEN
            RAISE EXCEPTION 'receipt rejected: %Ref', v_p
                USING ERRCODE = 'OB002', DETAIL = 'a non-empty string of at most 500 characters (the ack rule''s limit)';
        END IF;
        v_ref := v_doc ->> (v_p || 'Ref');
    END IF;
    IF v_doc ? (v_p || 'Digest')
       AND (pg_catalog.jsonb_typeof(v_doc -> (v_p || 'Digest')) IS DISTINCT FROM 'string'
            OR (v_doc ->> (v_p || 'Digest')) !~ '^[0-9a-f]{64}$') THEN
        RAISE EXCEPTION 'receipt rejected: %Digest', v_p
            USING ERRCODE = 'OB002', DETAIL = 'a jcs-sha256-v1 digest: 64 lower-case hex digits';
    END IF;
    v_complete := v_doc ? (v_p || 'Ref') AND v_doc ? (v_p || 'Digest');

    -- Digest of the candidate (the document minus <prefix>Ref, <prefix>Digest and the time).
    IF p_receipt_digest_candidate IS NULL THEN
        v_digest := outbox.jcs_sha256((v_doc - (v_p || 'Ref') - (v_p || 'Digest') - v_kind.time_field)::json);
    ELSE
        -- v_rtext is canonical and flat (closed: string, integer and boolean members only); cut
        -- the three string members out of it (see the header).
        v_expected := v_rtext;
        FOREACH v_member IN ARRAY ARRAY[v_p || 'Ref', v_p || 'Digest', v_kind.time_field] LOOP
            CONTINUE WHEN NOT v_doc ? v_member;
            v_cut := pg_catalog.to_json(v_member)::text || ':' || pg_catalog.to_json(v_doc ->> v_member)::text;
            IF pg_catalog.strpos(v_expected, ',' || v_cut) > 0 THEN
                v_expected := pg_catalog.replace(v_expected, ',' || v_cut, '');
            ELSE
                v_expected := pg_catalog.replace(v_expected, '{' || v_cut || ',', '{');
            END IF;
        END LOOP;
        IF p_receipt_digest_candidate IS DISTINCT FROM v_expected THEN
            v_problem := outbox._jcs_text_problem(p_receipt_digest_candidate);
            IF v_problem IS NOT NULL THEN
                RAISE EXCEPTION 'receipt digest candidate is not canonical text'
                    USING ERRCODE = 'OB201', DETAIL = v_problem,
                          HINT = 'pass the RFC 8785 canonical text of the candidate, or no candidate (SPEC D-2)';
            END IF;
            RAISE EXCEPTION 'receipt rejected: digest candidate'
                USING ERRCODE = 'OB002',
                      DETAIL = format('event %s: the digest candidate is not the receipt minus %sRef, %sDigest and %s', v_event_id, v_p, v_p, v_kind.time_field);
        END IF;
        v_digest := outbox._sha256_hex(p_receipt_digest_candidate);
    END IF;
    IF v_doc ? (v_p || 'Digest') AND (v_doc ->> (v_p || 'Digest')) <> v_digest THEN
        RAISE EXCEPTION 'receipt rejected: %Digest', v_p
            USING ERRCODE = 'OB002',
                  DETAIL = format('event %s: the receipt digest differs from jcs-sha256-v1 of its candidate (%s)', v_event_id, v_digest);
    END IF;

    -- The stored text: the canonical text of the complete receipt.
    IF v_complete THEN
        v_text := v_rtext;
    ELSE
        IF v_ref IS NULL THEN
            v_ref := inbox._inbox_default_ref(p_consumer_name, v_projection_name, v_projection_version, v_event_id);
            v_doc := v_doc || pg_catalog.jsonb_build_object(v_p || 'Ref', v_ref);
        END IF;
        v_doc := v_doc || pg_catalog.jsonb_build_object(v_p || 'Digest', v_digest);
        v_text := outbox.jcs_canonicalize(v_doc::json);
    END IF;

    -- R-PV-1: the projection version (its state was read with the destination above), checked
    -- after the document so that an invalid receipt is refused as before (OB002/OB201).
    IF p_build_token IS NOT NULL
       OR (v_projection_name <> '' AND v_version_state IS DISTINCT FROM 'active' AND v_version_state IS DISTINCT FROM 'frozen') THEN
        PERFORM inbox._inbox_check_version(v_projection_name, v_projection_version, p_build_token);
    END IF;

    -- Insert-or-compare.
    INSERT INTO inbox.inbox_receipts AS r
           (consumer_name, projection_name, projection_version, event_id, destination, receipt_kind,
            receipt_type, receipt_schema_version, receipt_ref, receipt_digest_algorithm_version,
            receipt_digest, receipt_document, event_type, event_schema_version, aggregate_id,
            aggregate_revision, event_envelope_digest_algorithm_version, event_envelope_sha256, receipt_time)
    VALUES (p_consumer_name, v_projection_name, v_projection_version, v_event_id, v_doc ->> 'destination',
            v_kind.receipt_kind, v_kind.receipt_type, v_kind.receipt_schema_version, v_ref, 'jcs-sha256-v1',
            v_digest, v_text, v_env ->> 'eventType', v_env ->> 'eventSchemaVersion', v_env ->> 'aggregateId',
            (v_env ->> 'aggregateRevision')::bigint, 'jcs-sha256-v1', v_env_sha, v_time)
    ON CONFLICT DO NOTHING
    RETURNING true INTO v_inserted;

    IF v_inserted THEN
        RETURN QUERY SELECT 'new'::text, v_ref, v_digest;
        RETURN;
    END IF;

    SELECT r.* INTO v_existing
      FROM inbox.inbox_receipts r
     WHERE r.consumer_name = p_consumer_name AND r.projection_name = v_projection_name
       AND r.projection_version = v_projection_version AND r.event_id = v_event_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'receipt rejected: ref % already names another receipt', v_ref
            USING ERRCODE = 'OB002', DETAIL = format('consumer %s: receipt refs are unique per consumer', p_consumer_name);
    END IF;
    IF v_existing.event_envelope_digest_algorithm_version <> 'jcs-sha256-v1'
       OR v_existing.event_envelope_sha256 <> v_env_sha THEN
        RAISE EXCEPTION 'receipt conflict: event % was already received with a different envelope digest', v_event_id
            USING ERRCODE = 'OB301',
                  DETAIL = format('consumer %s projection %s@%s: recorded %s, now %s', p_consumer_name, v_projection_name,
                                  v_projection_version, v_existing.event_envelope_sha256, v_env_sha),
                  HINT = 'same event id with different content: an integrity conflict, never retried (SPEC R-CO-1)';
    END IF;
    RETURN QUERY SELECT 'existing'::text, v_existing.receipt_ref, v_existing.receipt_digest;
END
$fn$;

COMMENT ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text, uuid) IS
    'Insert-or-compare of a content-addressed, closed consumer receipt: new | existing (first receipt''s ref/digest); OB301 same event id with a different envelope digest; OB002 inconsistent or open receipt, or a candidate that is not the receipt''s; OB201 not canonicalizable (hot path: candidate not canonical text); OB802 unregistered projection version, OB001 missing/stale build token of a shadow version. SPEC R-CO-1, R-AK-1a, D-2, R-PV-1, §13.';
REVOKE ALL ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.record_receipt(text, text, integer, json, json, text, uuid) TO outbox_consumer;

DROP FUNCTION inbox.observe_revision(text, text, integer, text, bigint);
-- inbox.observe_revision(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_aggregate_id text, p_aggregate_revision bigint, p_build_token uuid DEFAULT NULL)
--   RETURNS text  (public, SPEC R-CO-3, R-PV-1, §13)
-- Purpose: the per-aggregate revision check of an ordered consumer, inside its transaction.
--   'apply'     revision = progress+1 (or 1 with no progress): progress advanced to this
--               revision and every open gap it fills closed (closed_at, closed_by_revision);
--               commit it with the receipt and the domain mutation (R-CO-2), or roll it all back.
--   'duplicate' revision <= progress: nothing written (the consumer answers with its receipt).
--   'gap'       revision > progress+1: the gap row (expected = progress+1, highest seen
--               revision, first/last seen, count) is inserted or updated; progress unchanged,
--               nothing else written. The consumer commits that alone and answers retryable
--               awaiting_revision, writing no receipt (R-CO-3).
-- Projection version (SPEC §11b R-PV-1): as inbox.record_receipt's - a named projection's
--   version must be registered (OB802); active and frozen versions take no token, a shadow
--   version needs its live build's token (missing/stale: OB001), checked before anything is
--   written. One primary-key lookup of outbox.projection_versions; anything but "active/frozen,
--   no token" is decided by inbox._inbox_check_version (which locks a shadow version FOR SHARE).
-- Locking: the progress row FOR UPDATE, created first when the aggregate has none (last_revision
--   0 = nothing applied yet; revision 1 creates it applied). Observations of one aggregate
--   therefore serialise until the observing transaction ends, on a row no other role can lock
--   (R-SEC-5: no advisory key). READ COMMITTED is assumed.
-- SQLSTATEs: 42501 the calling role is not bound to consumer_name (inbox.consumer_roles, R-SEC-5);
--   OB105 empty aggregate id or revision <= 0; 22023 invalid consumer/projection key or a build
--   token without a projection; OB802 projection version not registered or retired; OB001 a
--   shadow version without its live build token, or a token for an active/frozen version.
-- Caller: outbox_consumer, SECURITY DEFINER: it has no table grants.
CREATE FUNCTION inbox.observe_revision(p_consumer_name text, p_projection_name text, p_projection_version integer,
                                       p_aggregate_id text, p_aggregate_revision bigint,
                                       p_build_token uuid DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
    v_last               bigint;
    v_version_state      text;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role
    -- R-PV-1: the version's state in one primary-key lookup; the rare cases go to the helper.
    IF v_projection_name <> '' THEN
        SELECT pv.state INTO v_version_state
          FROM outbox.projection_versions AS pv
         WHERE pv.projection_name = v_projection_name AND pv.projection_version = v_projection_version;
    END IF;
    IF p_build_token IS NOT NULL
       OR (v_projection_name <> '' AND v_version_state IS DISTINCT FROM 'active' AND v_version_state IS DISTINCT FROM 'frozen') THEN
        PERFORM inbox._inbox_check_version(v_projection_name, v_projection_version, p_build_token);
    END IF;
    IF p_aggregate_id IS NULL OR p_aggregate_id = '' OR p_aggregate_revision IS NULL OR p_aggregate_revision <= 0 THEN
        RAISE EXCEPTION 'envelope invalid: aggregate id and revision'
            USING ERRCODE = 'OB105', DETAIL = 'aggregateId must be non-empty and aggregateRevision > 0';
    END IF;

    -- Serialise observations of one aggregate on its progress row (R-SEC-5: a row lock, never an
    -- advisory key another role could take). The first observation of an aggregate creates the
    -- row: revision 1 creates it applied (last_revision 1, done); any other revision creates it
    -- with last_revision 0 ("nothing applied yet") and locks it. A concurrent first observation
    -- waits on the primary key until this transaction ends, then finds the row.
    IF p_aggregate_revision = 1 THEN
        INSERT INTO inbox.inbox_revision_progress
               (consumer_name, projection_name, projection_version, aggregate_id, last_revision)
        VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, 1)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            UPDATE inbox.inbox_revision_gaps g
               SET closed_at = pg_catalog.now(), closed_by_revision = 1
             WHERE g.consumer_name = p_consumer_name AND g.projection_name = v_projection_name
               AND g.projection_version = v_projection_version AND g.aggregate_id = p_aggregate_id
               AND g.closed_at IS NULL AND g.expected_revision <= 1;
            RETURN 'apply';
        END IF;
    ELSE
        INSERT INTO inbox.inbox_revision_progress
               (consumer_name, projection_name, projection_version, aggregate_id, last_revision)
        VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, 0)
        ON CONFLICT DO NOTHING;
    END IF;
    -- A new statement: sees the row committed by a transaction we waited for.
    SELECT p.last_revision INTO STRICT v_last
      FROM inbox.inbox_revision_progress p
     WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
       AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id
       FOR UPDATE;

    IF p_aggregate_revision <= v_last THEN
        RETURN 'duplicate';
    END IF;

    IF p_aggregate_revision = v_last + 1 THEN
        UPDATE inbox.inbox_revision_progress p
           SET last_revision = p_aggregate_revision, updated_at = pg_catalog.now()
         WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
           AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id;
        UPDATE inbox.inbox_revision_gaps g
           SET closed_at = pg_catalog.now(), closed_by_revision = p_aggregate_revision
         WHERE g.consumer_name = p_consumer_name AND g.projection_name = v_projection_name
           AND g.projection_version = v_projection_version AND g.aggregate_id = p_aggregate_id
           AND g.closed_at IS NULL AND g.expected_revision <= p_aggregate_revision;
        RETURN 'apply';
    END IF;

    INSERT INTO inbox.inbox_revision_gaps AS g
           (consumer_name, projection_name, projection_version, aggregate_id, expected_revision, seen_revision)
    VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, v_last + 1, p_aggregate_revision)
    ON CONFLICT (consumer_name, projection_name, projection_version, aggregate_id, expected_revision) DO UPDATE
       SET seen_revision = GREATEST(g.seen_revision, EXCLUDED.seen_revision),
           last_seen_at = pg_catalog.now(),
           observation_count = g.observation_count + 1;
    RETURN 'gap';
END
$fn$;

COMMENT ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint, uuid) IS
    'Per-aggregate revision check of an ordered consumer: apply (progress advanced, gaps closed) | duplicate | gap (gap recorded, nothing else); OB802 unregistered projection version, OB001 missing/stale build token of a shadow version. SPEC R-CO-3, R-PV-1, §13.';
REVOKE ALL ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint, uuid) TO outbox_consumer;


RESET ROLE;
