-- outbox.start_shadow_build(p_projection_name text, p_projection_version integer)
--   RETURNS TABLE(build_id uuid, build_token uuid)  (public, SPEC §11b R-PV-1, §13)
-- Purpose: start a shadow (re)build of a registered, not active projection version. The build
--   row records state 'building', its token and started_at/started_by; the version row names the
--   live build and its token (live_build_id, live_build_token: what inbox.record_receipt and
--   inbox.observe_revision check for a shadow version in one primary-key lookup).
--   One live build per version. A second start ABANDONS the live build and rotates: the old
--   build becomes 'abandoned' (ended_at set, terminal), its token is dead at once (its
--   claim_rebuild_sources and its receipts/revision calls under the version get OB001), and the
--   new build starts with an empty source ledger, so it hands out every source again. Receipts
--   and revision progress the abandoned build already committed under the version stay: they
--   are content-addressed, so the new build meets them as 'existing' / 'duplicate'. The choice
--   (rather than refusing the second start) lets a crashed or lost builder be replaced without
--   an operator step, the way a lease expires; fencing is by token, as for deliveries (OB001).
-- Locking: the version row FOR UPDATE (serialises starts of one version, and waits for shadow
--   receipts in flight: they hold it FOR SHARE while they check the token, so a rotation never
--   races a receipt written under the old token); the partial unique index
--   projection_builds_one_live keeps one 'building' row per version.
--   Rollback (R-PV-3): a FROZEN version (the former active one) may be started too: its build
--   is the candidate of the cut back, driven by the same freeze and cutover_projection. Its
--   version row names no live build (a frozen version takes receipts without token, kept
--   current by dual-apply); the token fences the build's claims, freeze and cutover only.
--   A live build that is frozen (boundary written) is abandoned the same way.
-- SQLSTATEs: 22023 invalid projection key; OB802 the version is not registered, or it is active
--   or retired (an active version keeps serving its deliveries).
-- Caller: outbox_projector, SECURITY DEFINER: it has no table grants.
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
