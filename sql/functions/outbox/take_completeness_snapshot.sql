-- outbox.take_completeness_snapshot(scope json)
--   RETURNS TABLE (manifest_id uuid, manifest_sha256 text, status text)
-- Purpose (SPEC R-OP-2): a completeness proof of the producer's database. Builds the
--   CompletenessProofManifest@2 of the scope (outbox._completeness_document: exact member set
--   with per-kind set digests and every guard) from the caller's REPEATABLE READ snapshot and
--   stores it immutably (outbox.completeness_manifests, OB202 on change) under a new
--   manifest_id. Receipt evidence: a delivery to the projection's active version is acknowledged
--   (verified ack receipt), a delivery to a former version has a receipt of the active one;
--   where the projector's inbox is another database, the Go companion (internal/readmodel)
--   snapshots it as well and records that part beside this manifest.
--   scope: {} = every event; optional eventTypes: [..], destinations: [..] (exact literals).
-- Locking: none (reads, one insert). Isolation: must run in REPEATABLE READ or SERIALIZABLE so
--   every read of the proof sees one snapshot.
-- SQLSTATEs: OB501 not in REPEATABLE READ/SERIALIZABLE; 22023 malformed scope.
-- Caller: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.take_completeness_snapshot(p_scope json)
 RETURNS TABLE(manifest_id uuid, manifest_sha256 text, status text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_filter text;
    v_doc    record;
    v_id     uuid;
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') NOT IN ('repeatable read', 'serializable') THEN
        RAISE EXCEPTION 'a completeness snapshot requires REPEATABLE READ or SERIALIZABLE isolation'
            USING ERRCODE = 'OB501',
                  DETAIL = pg_catalog.format('the transaction runs in %s', pg_catalog.current_setting('transaction_isolation')),
                  HINT = 'BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM outbox.take_completeness_snapshot(''{}''); COMMIT;';
    END IF;
    v_filter := outbox._completeness_filter(p_scope);
    SELECT * INTO v_doc FROM outbox._completeness_document(v_filter);
    INSERT INTO outbox.completeness_manifests (manifest_sha256, source_filter, status, member_count, document)
    VALUES (v_doc.manifest_sha256, v_filter, v_doc.status, v_doc.member_count, v_doc.document)
    RETURNING completeness_manifests.manifest_id INTO v_id;
    RETURN QUERY SELECT v_id, v_doc.manifest_sha256, v_doc.status;
END
$function$;

COMMENT ON FUNCTION outbox.take_completeness_snapshot(json) IS
    'Completeness proof (SPEC R-OP-2): stores the immutable, content-addressed CompletenessProofManifest@2 of the scope from one REPEATABLE READ snapshot; returns (manifest_id, manifest_sha256, status). OB501 outside REPEATABLE READ/SERIALIZABLE, 22023 malformed scope. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.take_completeness_snapshot(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.take_completeness_snapshot(json) TO outbox_auditor;
