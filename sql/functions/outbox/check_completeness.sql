-- outbox.check_completeness(manifest_id uuid) RETURNS TABLE (freshness text, reason text)
-- Purpose (SPEC R-OP-2): re-checks a stored proof against the current state by rebuilding the
--   whole manifest document of its source filter and comparing digests - the exact member set
--   and every guard's exact entry set, never a count, position, max id or time:
--   verified_current (reason NULL) | stale (source_changed) | unverified (no_completed_snapshot:
--   unknown id; definition_mismatch: the stored document no longer hashes to its
--   manifest_sha256 or is of an unknown manifest/digest version; guard_unavailable: the proof or
--   the re-check could not evaluate a guard).
-- Locking: none. The member set and the delivery guards are read by one statement.
-- Manifest versions: @2 (migration 037: receipt anti-join against the active projection
--   versions) and @1 (proofs taken before it) are both re-derived in their own shape.
-- SQLSTATEs: none of its own. Caller: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.check_completeness(p_manifest_id uuid)
 RETURNS TABLE(freshness text, reason text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_m   outbox.completeness_manifests%ROWTYPE;
    v_now record;
    v_ver integer;
BEGIN
    SELECT * INTO v_m FROM outbox.completeness_manifests AS c WHERE c.manifest_id = p_manifest_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unverified'::text, 'no_completed_snapshot'::text;
        RETURN;
    END IF;
    IF outbox._sha256_hex(v_m.document) <> v_m.manifest_sha256 THEN
        RETURN QUERY SELECT 'unverified'::text, 'definition_mismatch'::text;
        RETURN;
    END IF;
    -- Version and scope checks on the text (the document can be tens of MB: never parsed here).
    v_ver := CASE WHEN pg_catalog.strpos(v_m.document, ',"manifestSchemaVersion":2,"manifestType":"CompletenessProofManifest",') > 0 THEN 2
                  WHEN pg_catalog.strpos(v_m.document, ',"manifestSchemaVersion":1,"manifestType":"CompletenessProofManifest",') > 0 THEN 1 END;
    IF pg_catalog.left(v_m.document, 42) <> '{"digestAlgorithmVersion":"jcs-sha256-v1",'
       OR v_ver IS NULL
       OR pg_catalog.strpos(v_m.document, ',"sourceFilter":' || v_m.source_filter || ',"sourceFilterSha256":') = 0 THEN
        RETURN QUERY SELECT 'unverified'::text, 'definition_mismatch'::text;
        RETURN;
    END IF;
    IF v_m.status = 'unknown' THEN
        RETURN QUERY SELECT 'unverified'::text, 'guard_unavailable'::text;
        RETURN;
    END IF;
    SELECT * INTO v_now FROM outbox._completeness_document(v_m.source_filter, v_ver);
    IF v_now.status = 'unknown' THEN
        RETURN QUERY SELECT 'unverified'::text, 'guard_unavailable'::text;
    ELSIF v_now.manifest_sha256 = v_m.manifest_sha256 THEN
        RETURN QUERY SELECT 'verified_current'::text, NULL::text;
    ELSE
        RETURN QUERY SELECT 'stale'::text, 'source_changed'::text;
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox.check_completeness(uuid) IS
    'Re-checks a completeness proof against the current state (SPEC R-OP-2): verified_current | stale (source_changed) | unverified (no_completed_snapshot, definition_mismatch, guard_unavailable), by rebuilding the exact member and guard sets. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.check_completeness(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.check_completeness(uuid) TO outbox_auditor;
