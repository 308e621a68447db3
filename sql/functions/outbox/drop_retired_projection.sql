-- outbox.drop_retired_projection(p_projection_name text, p_projection_version integer)
--   RETURNS TABLE(dropped_rows bigint)  (public, SPEC §11b R-PV-3, §13)
-- Purpose: delete the kernel's inbox rows of a RETIRED version: its revision gaps, its revision
--   progress and those of its receipts no acknowledgement names (a receipt whose ref an
--   acknowledged delivery, hot or archived, carries is evidence, R-RT-2, and stays). The
--   projection's own tables belong to its consumer and are not touched; nor are observation
--   receipts, the registry rows, the builds or the proofs. dropped_rows = rows deleted; a second
--   call drops what is left (0). The inbox guards admit these deletes only from this function's
--   statements, for a retired version (sql/triggers/inbox/).
-- Locking: the version row FOR UPDATE (a retired version takes no inbox write: OB802).
-- SQLSTATEs: OB802 not registered, or not retired (never the active, a frozen or a shadow one).
-- Caller: outbox_registrar; SECURITY DEFINER (no table privileges).
CREATE OR REPLACE FUNCTION outbox.drop_retired_projection(p_projection_name text, p_projection_version integer)
 RETURNS TABLE(dropped_rows bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;

COMMENT ON FUNCTION outbox.drop_retired_projection(text, integer) IS
    'Delete the inbox gaps, progress and unacknowledged receipts of a retired projection version: (dropped_rows); OB802 not retired. SPEC R-PV-3, §13. Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION outbox.drop_retired_projection(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.drop_retired_projection(text, integer) TO outbox_registrar;
