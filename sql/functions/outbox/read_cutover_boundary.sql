-- outbox.read_cutover_boundary(p_boundary_id uuid) RETURNS json  (public, SPEC R-PV-2, §13)
-- Purpose: the CutoverCandidateBoundary@1 document of a boundary exactly as frozen (its
--   canonical RFC 8785 text as json: outbox.jcs_canonicalize(doc) = doc and sha256(doc) is
--   boundary_sha256 of freeze_cutover_candidate); NULL for an unknown boundary.
-- Locking: none (a primary-key read). SQLSTATEs: none of its own.
-- Caller: outbox_auditor; SECURITY DEFINER (no table privileges).
CREATE OR REPLACE FUNCTION outbox.read_cutover_boundary(p_boundary_id uuid)
 RETURNS json
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT c.document::json FROM outbox.cutover_boundaries AS c WHERE c.boundary_id = p_boundary_id
$function$;

COMMENT ON FUNCTION outbox.read_cutover_boundary(uuid) IS
    'The CutoverCandidateBoundary@1 document (canonical text) of a boundary, or NULL. SPEC R-PV-2, §13. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.read_cutover_boundary(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.read_cutover_boundary(uuid) TO outbox_auditor;
