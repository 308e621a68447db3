-- outbox.verify_ack_digests(p_max_rows integer DEFAULT 10000)
-- RETURNS TABLE(destination text, event_id uuid, problem text)  (public, SPEC D-2, §13)
-- Purpose: the audit sweep of the D-2 receipt hot path. For up to p_max_rows acknowledged
--   deliveries (oldest first) it re-canonicalizes the receipt body kept on the acknowledged
--   finish with the database's own canonicalizer (outbox.jcs_sha256 of the body minus
--   <prefix>Ref, <prefix>Digest and the kind's time field) and reports every delivery whose
--   stored ack_receipt_digest it does not reproduce, whose receipt is missing or not
--   canonicalizable, or whose receipt's ref/digest members differ from the ack columns.
-- Read-only. Cost: one PL/pgSQL canonicalization per row (an audit job, not the hot path).
-- Caller: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.verify_ack_digests(p_max_rows integer DEFAULT 10000)
 RETURNS TABLE(destination text, event_id uuid, problem text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_r      record;
    v_digest text;
BEGIN
    IF p_max_rows IS NULL OR p_max_rows < 1 OR p_max_rows > 1000000 THEN
        RAISE EXCEPTION 'verify_ack_digests: invalid max_rows'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('max_rows %s is outside 1..1000000', p_max_rows);
    END IF;
    FOR v_r IN
        SELECT d.destination, d.event_id, d.ack_receipt_digest, d.ack_receipt_ref, f.receipt, rk.field_prefix, rk.time_field
          FROM outbox.outbox_deliveries AS d
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = d.ack_receipt_kind
          LEFT JOIN outbox.outbox_delivery_attempt_finishes AS f
                 ON f.attempt_id = d.current_attempt_id AND f.outcome = 'acknowledged'
         WHERE d.status = 'acknowledged'
         ORDER BY d.delivered_at, d.destination, d.event_id
         LIMIT p_max_rows
    LOOP
        IF v_r.receipt IS NULL THEN
            destination := v_r.destination; event_id := v_r.event_id;
            problem := 'receipt body missing on the acknowledged finish';
            RETURN NEXT;
            CONTINUE;
        END IF;
        BEGIN
            SELECT outbox.jcs_sha256(pg_catalog.json_object_agg(e.key, e.value)) INTO v_digest
              FROM pg_catalog.json_each(v_r.receipt) AS e
             WHERE e.key <> ALL (ARRAY[v_r.field_prefix || 'Ref', v_r.field_prefix || 'Digest', v_r.time_field]);
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            destination := v_r.destination; event_id := v_r.event_id;
            problem := pg_catalog.format('receipt not canonicalizable: %s', SQLERRM);
            RETURN NEXT;
            CONTINUE;
        END;
        IF v_digest IS DISTINCT FROM v_r.ack_receipt_digest
           OR (v_r.receipt::jsonb)->>(v_r.field_prefix || 'Digest') IS DISTINCT FROM v_r.ack_receipt_digest
           OR (v_r.receipt::jsonb)->>(v_r.field_prefix || 'Ref') IS DISTINCT FROM v_r.ack_receipt_ref THEN
            destination := v_r.destination; event_id := v_r.event_id;
            problem := pg_catalog.format('stored receipt digest %s is not reproduced (recomputed %s)', v_r.ack_receipt_digest, v_digest);
            RETURN NEXT;
        END IF;
    END LOOP;
END
$function$;

COMMENT ON FUNCTION outbox.verify_ack_digests(integer) IS
    'Audit sweep (D-2): re-canonicalize the receipts of acknowledged deliveries and report every stored receipt digest the database does not reproduce. Read-only.';

REVOKE ALL ON FUNCTION outbox.verify_ack_digests(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.verify_ack_digests(integer) TO outbox_auditor;
