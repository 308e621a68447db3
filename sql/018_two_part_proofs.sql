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

{{ template "functions/record_two_part_proof.sql" . }}

RESET ROLE;
