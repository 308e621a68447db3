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
CREATE OR REPLACE FUNCTION outbox.retire_projection_version(p_projection_name text, p_projection_version integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION outbox.retire_projection_version(text, integer) IS
    'Retire a shadow or frozen projection version (its live build abandoned); OB809 while active, targeted by the active set or an open delivery, or the rollback target inside its window; OB802 not registered. SPEC R-PV-3, §13. Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION outbox.retire_projection_version(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retire_projection_version(text, integer) TO outbox_registrar;
