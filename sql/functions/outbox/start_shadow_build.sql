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
CREATE OR REPLACE FUNCTION outbox.start_shadow_build(p_projection_name text, p_projection_version integer)
 RETURNS TABLE(build_id uuid, build_token uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION outbox.start_shadow_build(text, integer) IS
    'Start a shadow build of a registered shadow version, or a rollback build of a frozen one: (build_id, build_token); a live build of the same version is abandoned (its token dies: OB001). OB802 not registered, active or retired. SPEC R-PV-1, R-PV-3, §13. Caller: outbox_projector.';

REVOKE ALL ON FUNCTION outbox.start_shadow_build(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.start_shadow_build(text, integer) TO outbox_projector;
