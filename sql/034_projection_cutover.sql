-- Projection versions, slice R-PV-2/R-PV-3: freeze, fenced cutover, rollback, retire (SPEC §11b,
-- §13 "Projection versions"; codes OB803, OB804, OB808, OB809; docs/projection-versions.md).
--   * claim pauses: outbox.destination_claim_pauses (one row per paused destination) and the
--     append-only outbox.destination_claim_pause_log; pause/resume_destination_claims;
--     outbox.claim_deliveries skips a paused destination (re-created from its file);
--   * outbox.projection_builds gains the states frozen (a boundary is written) and switched
--     (terminal, the cutover made the version active); outbox.cutover_boundaries and
--     outbox.cutover_boundary_members (CutoverCandidateBoundary@1 and its exact member set) and
--     outbox.cutover_readiness_proofs (CutoverReadinessProof@1), all append-only (OB202);
--   * freeze_cutover_candidate, read_cutover_boundary, candidate_progress, cutover_projection,
--     read_readiness_proof, retire_projection_version, drop_retired_projection;
--   * start_shadow_build also starts a rollback build of a frozen version, claim_rebuild_sources
--     hands a frozen build its missing boundary members and then refuses (OB803),
--     activate_delivery_set refuses a retarget outside the cutover (OB808): re-created;
--   * the receipt, revision-progress and gap guards let drop_retired_projection delete rows of
--     a retired version (re-created from their files);
--   * kernel setting projection_rollback_window_seconds (default 7 days): the rollback window.
-- Applied to a running database: new tables; CHECK constraints of outbox.projection_builds and
-- outbox.kernel_settings are replaced (ACCESS EXCLUSIVE on these small tables, one scan each);
-- functions are dropped and re-created in this transaction (a claim or activation in flight
-- waits for the commit). Nothing is paused by the migration.
SET LOCAL ROLE outbox_owner;

-- The rollback window (R-PV-3): a version frozen by a cutover stays the rollback target (not
-- retirable, OB809) for this many seconds after it was frozen. Owner-tunable like the payload
-- limit; 0 closes the window at once.
ALTER TABLE outbox.kernel_settings DROP CONSTRAINT kernel_settings_name_check;
ALTER TABLE outbox.kernel_settings ADD CONSTRAINT kernel_settings_name_check
    CHECK (name IN ('max_payload_bytes', 'projection_rollback_window_seconds'));
ALTER TABLE outbox.kernel_settings DROP CONSTRAINT kernel_settings_value_check;
ALTER TABLE outbox.kernel_settings ADD CONSTRAINT kernel_settings_value_check
    CHECK (value >= 0 AND (name <> 'max_payload_bytes' OR value > 0));
INSERT INTO outbox.kernel_settings (name, value, description) VALUES
    ('projection_rollback_window_seconds', 604800,
     'seconds a projection version frozen by a cutover stays the rollback target (retire refused, OB809)');

-- Claim pauses (R-PV-2 (c)): a row here makes outbox.claim_deliveries skip the destination.
CREATE TABLE outbox.destination_claim_pauses (
    destination text PRIMARY KEY REFERENCES outbox.delivery_destinations (destination),
    reason      text NOT NULL CHECK (reason <> '' AND length(reason) <= 500),
    paused_at   timestamptz NOT NULL DEFAULT now(),
    paused_by   text NOT NULL
);
COMMENT ON TABLE outbox.destination_claim_pauses IS
    'Destinations whose deliveries claim_deliveries does not hand out (SPEC R-PV-2); written only by pause/resume_destination_claims and cutover_projection; every change is in destination_claim_pause_log.';

CREATE TABLE outbox.destination_claim_pause_log (
    log_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination text NOT NULL,
    action      text NOT NULL CHECK (action IN ('pause', 'resume')),
    reason      text,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    changed_by  text NOT NULL
);
COMMENT ON TABLE outbox.destination_claim_pause_log IS
    'Append-only audit of claim pauses and resumes (SPEC R-PV-2).';

-- Builds: frozen (boundary written, token rotated) and switched (terminal) join building and
-- abandoned; a frozen build is still the version's one live build.
ALTER TABLE outbox.projection_builds DROP CONSTRAINT projection_builds_state_check;
ALTER TABLE outbox.projection_builds ADD CONSTRAINT projection_builds_state_check
    CHECK (state IN ('building', 'frozen', 'switched', 'abandoned'));
ALTER TABLE outbox.projection_builds DROP CONSTRAINT projection_builds_check;
ALTER TABLE outbox.projection_builds ADD CONSTRAINT projection_builds_check
    CHECK ((state IN ('building', 'frozen')) = (ended_at IS NULL));
DROP INDEX outbox.projection_builds_one_live;
CREATE UNIQUE INDEX projection_builds_one_live ON outbox.projection_builds (projection_name, projection_version)
    WHERE state IN ('building', 'frozen');

CREATE TABLE outbox.cutover_boundaries (
    boundary_id        uuid PRIMARY KEY,
    build_id           uuid NOT NULL UNIQUE REFERENCES outbox.projection_builds (build_id),
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    consumer_name      text NOT NULL,
    source_filter      jsonb NOT NULL,
    document           text NOT NULL,
    boundary_sha256    text NOT NULL CHECK (boundary_sha256 ~ '^[0-9a-f]{64}$'),
    frozen_at          timestamptz NOT NULL,
    FOREIGN KEY (projection_name, projection_version) REFERENCES outbox.projection_versions
);
COMMENT ON TABLE outbox.cutover_boundaries IS
    'Immutable CutoverCandidateBoundary@1 documents, one per frozen build (SPEC R-PV-2): canonical text and its sha256.';

CREATE TABLE outbox.cutover_boundary_members (
    boundary_id     uuid NOT NULL, -- no foreign key: freeze writes the members first, then the document over them
    source_kind     text NOT NULL CHECK (source_kind IN ('event', 'observation')),
    source_id       uuid NOT NULL,
    envelope_sha256 text NOT NULL,
    source_at       timestamptz NOT NULL,
    PRIMARY KEY (boundary_id, source_kind, source_id)
);
COMMENT ON TABLE outbox.cutover_boundary_members IS
    'The exact source member set of a cutover boundary (SPEC R-PV-2), append-only; its per-kind set digests are in the boundary document.';

CREATE TABLE outbox.cutover_readiness_proofs (
    proof_id             uuid PRIMARY KEY,
    build_id             uuid NOT NULL REFERENCES outbox.projection_builds (build_id),
    boundary_id          uuid NOT NULL REFERENCES outbox.cutover_boundaries (boundary_id),
    projection_name      text NOT NULL,
    from_version         integer NOT NULL,
    to_version           integer NOT NULL,
    result               text NOT NULL CHECK (result IN ('switched', 'blocked')),
    reasons              text[] NOT NULL,
    document             text NOT NULL,
    proof_sha256         text NOT NULL CHECK (proof_sha256 ~ '^[0-9a-f]{64}$'),
    decided_at           timestamptz NOT NULL,
    decided_by           text NOT NULL,
    CHECK ((result = 'switched') = (cardinality(reasons) = 0))
);
CREATE INDEX cutover_readiness_proofs_build ON outbox.cutover_readiness_proofs (build_id, decided_at);
COMMENT ON TABLE outbox.cutover_readiness_proofs IS
    'Append-only CutoverReadinessProof@1 documents (SPEC R-PV-2): one per cutover_projection call that reached its guards, Switched or Blocked with reasons.';

-- Append-only / immutable: the registry guard raises OB202 for every UPDATE, DELETE and TRUNCATE
-- of a table it does not name (triggers/projection_versions__guarded.sql).
CREATE TRIGGER tg_destination_claim_pause_log__append_only BEFORE UPDATE OR DELETE ON outbox.destination_claim_pause_log
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_destination_claim_pause_log__no_truncate BEFORE TRUNCATE ON outbox.destination_claim_pause_log
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_boundaries__immutable BEFORE UPDATE OR DELETE ON outbox.cutover_boundaries
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_boundaries__no_truncate BEFORE TRUNCATE ON outbox.cutover_boundaries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_boundary_members__immutable BEFORE UPDATE OR DELETE ON outbox.cutover_boundary_members
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_boundary_members__no_truncate BEFORE TRUNCATE ON outbox.cutover_boundary_members
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_readiness_proofs__immutable BEFORE UPDATE OR DELETE ON outbox.cutover_readiness_proofs
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_projection_registry__guarded();
CREATE TRIGGER tg_cutover_readiness_proofs__no_truncate BEFORE TRUNCATE ON outbox.cutover_readiness_proofs
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_projection_registry__guarded();

{{ template "functions/pause_destination_claims.sql" . }}
{{ template "functions/resume_destination_claims.sql" . }}

-- The claim skips paused destinations (its destination look-up statement reads the pauses).
DROP FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text);
{{ template "functions/claim_deliveries.sql" . }}

{{ template "functions/_delivery_set_retarget_problem.sql" . }}
DROP FUNCTION outbox.activate_delivery_set(integer, integer, text, text);
{{ template "functions/activate_delivery_set.sql" (dict "retarget_check" true) }}

DROP FUNCTION outbox.start_shadow_build(text, integer);
{{ template "functions/start_shadow_build.sql" . }}
DROP FUNCTION outbox.claim_rebuild_sources(uuid, uuid, integer);
{{ template "functions/claim_rebuild_sources.sql" . }}

{{ template "functions/_cutover_guards.sql" . }}
{{ template "functions/freeze_cutover_candidate.sql" . }}
{{ template "functions/read_cutover_boundary.sql" . }}
{{ template "functions/candidate_progress.sql" . }}
{{ template "functions/cutover_projection.sql" . }}
{{ template "functions/read_readiness_proof.sql" . }}
{{ template "functions/retire_projection_version.sql" . }}
{{ template "functions/drop_retired_projection.sql" . }}

-- The inbox guards admit the deletes of drop_retired_projection (their files changed).
DROP TRIGGER tg_inbox_receipts__append_only ON inbox.inbox_receipts;
DROP TRIGGER tg_inbox_receipts__append_only_truncate ON inbox.inbox_receipts;
DROP FUNCTION inbox.tg_inbox_receipts__append_only();
{{ template "triggers/inbox_receipts__append_only.sql" . }}
DROP TRIGGER tg_inbox_revision_progress__monotonic ON inbox.inbox_revision_progress;
DROP TRIGGER tg_inbox_revision_progress__monotonic_truncate ON inbox.inbox_revision_progress;
DROP FUNCTION inbox.tg_inbox_revision_progress__monotonic();
{{ template "triggers/inbox_revision_progress__monotonic.sql" . }}
DROP TRIGGER tg_inbox_revision_gaps__closed_immutable ON inbox.inbox_revision_gaps;
DROP TRIGGER tg_inbox_revision_gaps__closed_immutable_truncate ON inbox.inbox_revision_gaps;
DROP FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();
{{ template "triggers/inbox_revision_gaps__closed_immutable.sql" . }}

RESET ROLE;
