-- The last cutover readiness proofs on the status page (issue 24 item 6; SPEC R-PV-5): one read
-- function for outbox_auditor. New function only.
SET LOCAL ROLE outbox_owner;

-- outbox.console_readiness_proofs(p_limit integer)
-- RETURNS TABLE (proof_id uuid, projection_name text, from_version integer, to_version integer,
--   result text, reasons text[], proof_sha256 text, decided_at timestamptz)
-- (public, status page, issue 24 item 6; SPEC R-PV-2, R-PV-5)
-- Purpose: the p_limit most recent CutoverReadinessProof@1 (newest first): which projection went
--   from which version to which, switched or blocked with its reasons, the proof's digest. The
--   document itself is read by id (outbox.read_readiness_proof).
-- SQLSTATEs: 22023 a limit outside 1..1000. Locking: none. Callers: outbox_auditor.
CREATE FUNCTION outbox.console_readiness_proofs(p_limit integer)
RETURNS TABLE (proof_id uuid, projection_name text, from_version integer, to_version integer, result text,
               reasons text[], proof_sha256 text, decided_at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'console_readiness_proofs: a limit 1..1000 is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT p.proof_id, p.projection_name, p.from_version, p.to_version, p.result, p.reasons, p.proof_sha256, p.decided_at
      FROM outbox.cutover_readiness_proofs AS p
     ORDER BY p.decided_at DESC, p.proof_id DESC
     LIMIT p_limit;
END
$fn$;
COMMENT ON FUNCTION outbox.console_readiness_proofs(integer) IS
    'The most recent cutover readiness proofs (projection, versions, result, reasons, digest) for the status page (SPEC R-PV-5). Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.console_readiness_proofs(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_readiness_proofs(integer) TO outbox_auditor;


RESET ROLE;
