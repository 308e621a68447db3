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
CREATE OR REPLACE FUNCTION inbox._inbox_check_version(p_projection_name text, p_projection_version integer, p_build_token uuid)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION inbox._inbox_check_version(text, integer, uuid) IS
    'Private: projection version check of the inbox functions (OB802 unregistered/retired, OB001 missing/stale shadow token or a token for an active/frozen version, 22023 token without projection); locks a shadow version FOR SHARE. SPEC R-PV-1.';

REVOKE ALL ON FUNCTION inbox._inbox_check_version(text, integer, uuid) FROM PUBLIC;
