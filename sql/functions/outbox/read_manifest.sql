-- outbox.read_manifest(manifest_id uuid) RETURNS json
-- Purpose (SPEC R-OP-2): the stored CompletenessProofManifest@1 document (its canonical text as
--   json: byte-identical to what manifest_sha256 covers); NULL for an unknown id.
-- Locking: none. SQLSTATEs: none. Caller: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.read_manifest(p_manifest_id uuid)
 RETURNS json
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT c.document::json FROM outbox.completeness_manifests AS c WHERE c.manifest_id = p_manifest_id
$function$;

COMMENT ON FUNCTION outbox.read_manifest(uuid) IS
    'The CompletenessProofManifest@1 document of a proof, canonical text as json (NULL for an unknown id) (SPEC R-OP-2). Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.read_manifest(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.read_manifest(uuid) TO outbox_auditor;
