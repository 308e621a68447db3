-- Mailbox inbox pipeline (SPEC §10, R-MX-1..12, §13 "Mailbox pipeline"; msgexchange-v2):
-- schema mailbox with the watermark per source, one processing row per message, open and
-- released hole ranges, backfill intents and their resolutions, the pump holder row per source,
-- and the reference handler's business tables. Every function is SECURITY DEFINER owned by
-- outbox_owner with a pinned search_path; nothing is granted to PUBLIC. Role outbox_mailbox
-- calls everything but register_source (outbox_registrar); outbox_auditor calls
-- pipeline_status and reads the tables.
-- outbox_mailbox: the pump's login user is granted it (with outbox_producer: its handler
-- appends events).
{{ template "roles/create_group_role.sql" "outbox_mailbox" }}
{{ template "roles/mailbox_read_all_stats.sql" . }}

SET LOCAL ROLE outbox_owner;

CREATE SCHEMA mailbox AUTHORIZATION outbox_owner;
REVOKE ALL ON SCHEMA mailbox FROM PUBLIC;
COMMENT ON SCHEMA mailbox IS 'pgoutbox mailbox inbox pipeline: watermark, holes, FIFO head, backfill marks (SPEC §10)';

-- One row per source (a mailbox table of another database). watermark = W: every msg_id <= W
-- has a processing row or lies in a released hole (R-MX-2); it only increases (CHECK by the
-- functions' CAS and by trigger mailbox_sources__watermark_monotonic).
CREATE TABLE mailbox.sources (
    source                text PRIMARY KEY CHECK (source ~ '^[a-z0-9][a-z0-9._@-]*$' AND length(source) <= 200),
    hole_release_after    interval NOT NULL CHECK (hole_release_after > interval '0'),
    backfill_deadline     interval NOT NULL CHECK (backfill_deadline > interval '0'),
    start_after           bigint NOT NULL CHECK (start_after >= 0),
    head_backoff_base     interval NOT NULL CHECK (head_backoff_base > interval '0'),
    head_backoff_cap      interval NOT NULL CHECK (head_backoff_cap >= head_backoff_base),
    max_attempts          integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    watermark             bigint NOT NULL,
    watermark_advanced_at timestamptz,
    last_discovery_at     timestamptz,
    registered_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (watermark >= start_after)
);

-- The pump holder of a source (R-MX-11, R-SEC-5): the session (pid + backend_start) that holds
-- the source. A row lock on this row (FOR UPDATE) serializes acquisition; liveness is checked
-- against pg_stat_activity, so a dead session's hold is free again. No advisory lock anywhere.
CREATE TABLE mailbox.pump_holders (
    source               text PRIMARY KEY REFERENCES mailbox.sources (source),
    holder_pid           integer,
    holder_backend_start timestamptz,
    holder_user          text,
    acquired_at          timestamptz,
    heartbeat_at         timestamptz,
    CHECK ((holder_pid IS NULL) = (holder_backend_start IS NULL))
);

-- One processing row per message (R-MX-1 "enqueued", R-MX-9). state:
--   pending   enqueued, not finished (the head when it is the smallest unfinished id <= W)
--   failed    the handler failed; due again at available_at (backoff); still holds the head
--   succeeded terminal (R-MX-6)
--   dead      terminal dead letter with dead_reason, kept and visible (R-MX-6, R-MX-10)
--   late      a row that committed inside a released hole: never a head, never processed,
--             reported for an operator (R-MX-2)
-- backfill_state (R-MX-8): NULL = owes no mark (not terminal, or late); owed (written by the
-- same statement as the terminal state), done, abandoned, resolved (operator, see
-- backfill_resolutions).
CREATE TABLE mailbox.messages (
    source              text NOT NULL REFERENCES mailbox.sources (source),
    msg_id              bigint NOT NULL,
    message             jsonb NOT NULL,
    received_at         timestamptz,
    enqueued_at         timestamptz NOT NULL,
    state               text NOT NULL CHECK (state IN ('pending', 'failed', 'succeeded', 'dead', 'late')),
    attempt             integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    available_at        timestamptz NOT NULL DEFAULT '-infinity',
    lease_owner         text,
    lease_token         uuid,
    lease_expires_at    timestamptz,
    last_error_code     text REFERENCES outbox.error_codes (code),
    dead_reason         text,
    finished_at         timestamptz,
    backfill_state      text CHECK (backfill_state IN ('owed', 'done', 'abandoned', 'resolved')),
    backfill_outcome    text CHECK (backfill_outcome IN ('written', 'already_marked', 'missing', 'transient')),
    backfill_attempts   integer NOT NULL DEFAULT 0,
    backfill_next_at    timestamptz,
    backfill_done_at    timestamptz,
    abandon_reason      text CHECK (abandon_reason IN ('missing', 'deadline')),
    abandoned_at        timestamptz,
    PRIMARY KEY (source, msg_id),
    CHECK ((state IN ('succeeded', 'dead')) = (backfill_state IS NOT NULL)),
    CHECK ((state IN ('succeeded', 'dead')) = (finished_at IS NOT NULL)),
    CHECK ((state = 'dead') = (dead_reason IS NOT NULL)),
    CHECK ((lease_token IS NULL) = (lease_expires_at IS NULL))
);
-- The head (R-MX-3): the smallest unfinished id of a source, O(1) whatever the history.
CREATE INDEX messages_unfinished ON mailbox.messages (source, msg_id) WHERE state IN ('pending', 'failed');
-- Terminal rows owing a mark, oldest first (claim_backfill, oldest unmarked age).
CREATE INDEX messages_backfill_owed ON mailbox.messages (source, msg_id) WHERE backfill_state = 'owed';
-- Operator lists: dead letters, late rows, abandoned backfills.
CREATE INDEX messages_attention ON mailbox.messages (source, state, backfill_state)
    WHERE state IN ('dead', 'late') OR backfill_state = 'abandoned';

-- Open holes (R-MX-2): ranges of ids above W with no processing row, with the time we first saw
-- each id missing (our clock, never received_at). A range split by a filled id keeps its
-- first_seen_at on both parts, so a newer hole always keeps its full window.
-- Released holes: ranges W skipped once they were older than hole_release_after; kept so a row
-- committing inside one later is recognized as late (and the pump re-reads them for a while).
CREATE TABLE mailbox.holes (
    source        text NOT NULL REFERENCES mailbox.sources (source),
    first_id      bigint NOT NULL,
    last_id       bigint NOT NULL,
    first_seen_at timestamptz NOT NULL,
    released_at   timestamptz,
    PRIMARY KEY (source, first_id),
    CHECK (last_id >= first_id)
);
CREATE INDEX holes_open ON mailbox.holes (source, first_id) WHERE released_at IS NULL;
CREATE INDEX holes_released ON mailbox.holes (source, released_at) WHERE released_at IS NOT NULL;

-- Operator resolutions of abandoned backfills (R-MX-8): one immutable audit row each (no foreign
-- key: the audit outlives an archived processing row).
CREATE TABLE mailbox.backfill_resolutions (
    source       text NOT NULL,
    msg_id       bigint NOT NULL,
    resolution   text NOT NULL CHECK (resolution IN ('marked_manually', 'not_needed')),
    note         text NOT NULL,
    resolved_by  text NOT NULL,
    resolved_at  timestamptz NOT NULL,
    PRIMARY KEY (source, msg_id)
);

-- The reference handler's business effect (R-MX-9, R-MX-10): one effective record per business
-- identity, and the per-key processing sequence that becomes the outbound event's
-- aggregateRevision. A real handler keeps its own tables; these serve tests and the demo.
CREATE TABLE mailbox.ref_effects (
    source     text NOT NULL REFERENCES mailbox.sources (source),
    identity   text NOT NULL CHECK (length(identity) BETWEEN 1 AND 200),
    msg_id     bigint NOT NULL,
    key        text NOT NULL,
    revision   bigint NOT NULL CHECK (revision > 0),
    type       text NOT NULL,
    applied_at timestamptz NOT NULL,
    PRIMARY KEY (source, identity),
    UNIQUE (source, key, revision)
);
CREATE TABLE mailbox.ref_key_sequences (
    source        text NOT NULL REFERENCES mailbox.sources (source),
    key           text NOT NULL,
    last_revision bigint NOT NULL CHECK (last_revision > 0),
    PRIMARY KEY (source, key)
);

-- Triggers (R-MX-2, R-MX-6/7, R-SEC-3): W only increases; terminal states never revert; the
-- resolution audit is append-only.
{{ template "triggers/mailbox_sources__watermark_monotonic.sql" . }}
{{ template "triggers/mailbox_messages__terminal_immutable.sql" . }}
{{ template "triggers/mailbox_backfill_resolutions__append_only.sql" . }}

-- Private helpers (granted to nobody).
{{ template "functions/_mailbox_source.sql" . }}
{{ template "functions/_mailbox_require_pump.sql" . }}
{{ template "functions/_mailbox_fence_fail.sql" . }}

-- Public API (SPEC §13).
{{ template "functions/register_source.sql" . }}
{{ template "functions/acquire_pump.sql" . }}
{{ template "functions/record_discovery.sql" . }}
{{ template "functions/released_holes.sql" . }}
{{ template "functions/claim_head.sql" . }}
{{ template "functions/apply_reference_effect.sql" . }}
{{ template "functions/complete_head.sql" . }}
{{ template "functions/fail_head.sql" . }}
{{ template "functions/claim_backfill.sql" . }}
{{ template "functions/record_backfill.sql" . }}
{{ template "functions/resolve_abandoned.sql" . }}
{{ template "functions/pipeline_status.sql" . }}

-- Grants (SPEC R-SEC-1): outbox_mailbox acts only through the functions; the auditor reads.
GRANT USAGE ON SCHEMA mailbox TO outbox_mailbox, outbox_registrar, outbox_auditor;
GRANT SELECT ON mailbox.sources, mailbox.pump_holders, mailbox.messages, mailbox.holes,
                mailbox.backfill_resolutions, mailbox.ref_effects, mailbox.ref_key_sequences
    TO outbox_auditor;

RESET ROLE;
