-- outbox.read_readiness_proof(p_proof_id uuid) RETURNS json  (public, SPEC R-PV-2, §13)
-- Purpose: the CutoverReadinessProof@1 document of a proof exactly as written by
--   outbox.cutover_projection (canonical RFC 8785 text as json; sha256 of it is proof_sha256);
--   NULL for an unknown proof. Proofs are append-only (OB202).
-- Locking: none (a primary-key read). SQLSTATEs: none of its own.
-- Caller: outbox_auditor; SECURITY DEFINER (no table privileges).
CREATE OR REPLACE FUNCTION outbox.read_readiness_proof(p_proof_id uuid)
 RETURNS json
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT p.document::json FROM outbox.cutover_readiness_proofs AS p WHERE p.proof_id = p_proof_id
$function$;

COMMENT ON FUNCTION outbox.read_readiness_proof(uuid) IS
    'The CutoverReadinessProof@1 document (canonical text) of a proof, or NULL. SPEC R-PV-2, §13. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.read_readiness_proof(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.read_readiness_proof(uuid) TO outbox_auditor;
