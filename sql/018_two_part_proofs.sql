-- Two-part completeness proofs kept in the producer database (SPEC R-OP-2): when the projector's
-- inbox is another database, the Go companion's CompletenessProofTwoPart (the producer's
-- manifest by its sha256 + the inbox part with its guards) is recorded immutably beside the
-- manifest it binds, so the proof of both parts is readable, verifiable and auditable here.
SET LOCAL ROLE outbox_owner;

CREATE TABLE outbox.completeness_two_part_proofs (
    proof_sha256 text PRIMARY KEY CHECK (proof_sha256 ~ '^[0-9a-f]{64}$'),
    manifest_id  uuid NOT NULL, -- the manifest it binds (checked by record_two_part_proof; no FK: TRUNCATE of the manifests must stay OB202, not 0A000)
    status       text NOT NULL CHECK (status IN ('complete_for_supported_scope', 'partial_source_gap', 'unknown')),
    document     text NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    recorded_by  text NOT NULL DEFAULT session_user
);
CREATE INDEX completeness_two_part_proofs_manifest ON outbox.completeness_two_part_proofs (manifest_id, recorded_at DESC);
COMMENT ON TABLE outbox.completeness_two_part_proofs IS
    'Immutable, content-addressed CompletenessProofTwoPart documents (producer manifest + projector inbox part), SPEC R-OP-2; UPDATE/DELETE/TRUNCATE raise OB202.';
REVOKE ALL ON outbox.completeness_two_part_proofs FROM PUBLIC;
GRANT SELECT ON outbox.completeness_two_part_proofs TO outbox_auditor;
CREATE TRIGGER tg_completeness_two_part_proofs__immutable
    BEFORE UPDATE OR DELETE ON outbox.completeness_two_part_proofs
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
CREATE TRIGGER tg_completeness_two_part_proofs__no_truncate
    BEFORE TRUNCATE ON outbox.completeness_two_part_proofs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();

-- outbox.record_two_part_proof(p_document json) RETURNS text  (public, SPEC R-OP-2)
-- Purpose: keep a completeness proof whose projector inbox is another database (the Go
--   companion, internal/readmodel.TakeTwoPart, snapshots the producer here and then the inbox)
--   beside the producer's manifest: an immutable, content-addressed CompletenessProofTwoPart
--   document recording each part - the producer's part by the sha256 of a manifest stored in
--   outbox.completeness_manifests, the inbox part with its guards (receipt anti-join, open
--   revision gaps, matched receipts: count, evaluated, set digest). Insert-or-compare on the
--   document's jcs-sha256-v1 (returned). The rule "complete iff every guard is 0" is checked
--   here too: status complete_for_supported_scope only when the producer's manifest is complete
--   and both inbox guards are evaluated and 0; partial_source_gap / unknown otherwise as the
--   document says (an inconsistent status is refused).
-- SQLSTATEs: 22023 not such a document, an unknown producer manifest, a status the guards do
--   not give; OB201 not canonicalizable.
-- Caller: outbox_auditor.
CREATE FUNCTION outbox.record_two_part_proof(p_document json)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_doc       jsonb;
    v_text      text;
    v_sha       text;
    v_manifest  outbox.completeness_manifests;
    v_inbox     jsonb;
    v_complete  boolean;
    v_status    text;
BEGIN
    IF p_document IS NULL OR pg_catalog.json_typeof(p_document) <> 'object' THEN
        RAISE EXCEPTION 'record_two_part_proof: not a JSON object' USING ERRCODE = '22023';
    END IF;
    v_text := outbox.jcs_canonicalize(p_document);
    v_doc := v_text::jsonb;
    IF v_doc ->> 'proofType' IS DISTINCT FROM 'CompletenessProofTwoPart'
       OR v_doc ->> 'digestAlgorithmVersion' IS DISTINCT FROM 'jcs-sha256-v1'
       OR pg_catalog.jsonb_typeof(v_doc -> 'parts') IS DISTINCT FROM 'array'
       OR pg_catalog.jsonb_array_length(v_doc -> 'parts') <> 2
       OR v_doc -> 'parts' -> 0 ->> 'part' IS DISTINCT FROM 'producer'
       OR v_doc -> 'parts' -> 1 ->> 'part' IS DISTINCT FROM 'projector_inbox' THEN
        RAISE EXCEPTION 'record_two_part_proof: not a CompletenessProofTwoPart document'
            USING ERRCODE = '22023',
                  DETAIL = 'need proofType CompletenessProofTwoPart, digestAlgorithmVersion jcs-sha256-v1 and parts [producer, projector_inbox]';
    END IF;
    SELECT m.* INTO v_manifest
      FROM outbox.completeness_manifests AS m
     WHERE m.manifest_sha256 = v_doc -> 'parts' -> 0 ->> 'manifestSha256'
     ORDER BY m.taken_at
     LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'record_two_part_proof: unknown producer manifest'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('no stored manifest has sha256 %s', v_doc -> 'parts' -> 0 ->> 'manifestSha256');
    END IF;
    v_inbox := v_doc -> 'parts' -> 1;
    v_complete := v_manifest.status = 'complete_for_supported_scope'
              AND (v_inbox -> 'receiptAntiJoin' ->> 'evaluated') = 'true' AND (v_inbox -> 'receiptAntiJoin' ->> 'count') = '0'
              AND (v_inbox -> 'openRevisionGaps' ->> 'evaluated') = 'true' AND (v_inbox -> 'openRevisionGaps' ->> 'count') = '0';
    v_status := v_doc ->> 'status';
    IF v_doc -> 'parts' -> 0 ->> 'status' IS DISTINCT FROM v_manifest.status
       OR v_status IS NULL
       OR (v_status = 'complete_for_supported_scope') <> v_complete
       OR v_status NOT IN ('complete_for_supported_scope', 'partial_source_gap', 'unknown')
       OR (v_status = 'unknown') <> (v_manifest.status = 'unknown') THEN
        RAISE EXCEPTION 'record_two_part_proof: status does not follow from the guards'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('status %s; producer manifest %s; complete only when the producer''s part is complete and both inbox guards are evaluated and 0',
                                             v_status, v_manifest.status);
    END IF;
    v_sha := outbox._sha256_hex(v_text);
    INSERT INTO outbox.completeness_two_part_proofs (proof_sha256, manifest_id, status, document)
    VALUES (v_sha, v_manifest.manifest_id, v_status, v_text)
    ON CONFLICT (proof_sha256) DO NOTHING;
    RETURN v_sha;
END
$fn$;

COMMENT ON FUNCTION outbox.record_two_part_proof(json) IS
    'Keep an immutable, content-addressed CompletenessProofTwoPart (producer manifest + projector inbox part) beside its manifest; returns its jcs-sha256-v1. 22023, OB201. SPEC R-OP-2. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.record_two_part_proof(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.record_two_part_proof(json) TO outbox_auditor;


RESET ROLE;
