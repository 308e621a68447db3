-- Mailbox inbox pipeline (SPEC §10, R-MX-1..12, §13 "Mailbox pipeline"; msgexchange-v2):
-- schema mailbox with the watermark per source, one processing row per message, open and
-- released hole ranges, backfill intents and their resolutions, the pump holder row per source,
-- and the reference handler's business tables. Every function is SECURITY DEFINER owned by
-- outbox_owner with a pinned search_path; nothing is granted to PUBLIC. Role outbox_mailbox
-- calls everything but register_source (outbox_registrar); outbox_auditor calls
-- pipeline_status and reads the tables.
-- outbox_mailbox: the pump's login user is granted it (with outbox_producer: its handler
-- appends events).
-- One NOLOGIN group role whose name is the template argument (a migration includes this file with
-- the role name as the template data; SPEC R-SEC-1). Roles are cluster-wide: created idempotently, tolerant of a parallel template
-- build creating the same role at the same moment (duplicate_object), as roles/create_roles.sql
-- does for the first six roles. Operators grant it to login users.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_mailbox') THEN
        BEGIN
            CREATE ROLE outbox_mailbox NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;

-- mailbox.acquire_pump decides whether the recorded holder of a source is still alive by the
-- holder's pid AND backend_start in pg_stat_activity (a dead session's pid may be reused).
-- PostgreSQL shows another session's backend_start only to members of that session's role or
-- of pg_read_all_stats; the SECURITY DEFINER functions run as outbox_owner, so outbox_owner
-- needs pg_read_all_stats (read-only statistics, no data). Granting it needs a superuser or a
-- role with ADMIN OPTION on pg_read_all_stats; without it the migration warns and
-- acquire_pump refuses with a HINT naming this grant (docs/mailbox.md).
DO $stats$
BEGIN
    IF NOT pg_catalog.pg_has_role('outbox_owner', 'pg_read_all_stats', 'USAGE') THEN
        BEGIN
            GRANT pg_read_all_stats TO outbox_owner;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'could not GRANT pg_read_all_stats TO outbox_owner: mailbox.acquire_pump will refuse until a superuser grants it';
        END;
    END IF;
END
$stats$;


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
-- tg_mailbox_sources__watermark_monotonic: W only increases (SPEC R-MX-2), and a
-- source's configuration and start never change after registration (register_source is
-- insert-or-compare). Any other UPDATE, DELETE or TRUNCATE raises OB202, for every role.
CREATE FUNCTION mailbox.tg_mailbox_sources__watermark_monotonic()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE'
       AND (NEW.source, NEW.hole_release_after, NEW.backfill_deadline, NEW.start_after, NEW.head_backoff_base,
            NEW.head_backoff_cap, NEW.max_attempts, NEW.registered_at)
           IS NOT DISTINCT FROM
           (OLD.source, OLD.hole_release_after, OLD.backfill_deadline, OLD.start_after, OLD.head_backoff_base,
            OLD.head_backoff_cap, OLD.max_attempts, OLD.registered_at)
       AND NEW.watermark >= OLD.watermark THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on mailbox.sources is not allowed', TG_OP
        USING ERRCODE = 'OB202',
              DETAIL = 'the watermark only increases and a source''s configuration is fixed at registration (SPEC R-MX-2)';
END
$fn$;
REVOKE ALL ON FUNCTION mailbox.tg_mailbox_sources__watermark_monotonic() FROM PUBLIC;

CREATE TRIGGER tg_mailbox_sources__watermark_monotonic BEFORE UPDATE OR DELETE ON mailbox.sources
    FOR EACH ROW EXECUTE FUNCTION mailbox.tg_mailbox_sources__watermark_monotonic();
CREATE TRIGGER tg_mailbox_sources__watermark_monotonic_truncate BEFORE TRUNCATE ON mailbox.sources
    FOR EACH STATEMENT EXECUTE FUNCTION mailbox.tg_mailbox_sources__watermark_monotonic();

-- tg_mailbox_messages__terminal_immutable: a processing row's identity and message never change;
-- terminal states (succeeded, dead) never revert or change (SPEC R-MX-6, R-MX-7); the
-- backfill fact only moves owed -> done | abandoned, abandoned -> resolved (R-MX-8, INV-8).
-- DELETE (archiving a processing row) is allowed only for a terminal row whose mark is done or
-- resolved by an operator: an abandoned or owed backfill never counts as marked for purge
-- decisions (R-MX-8). Anything else raises OB202, for every role.
CREATE FUNCTION mailbox.tg_mailbox_messages__terminal_immutable()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.state IN ('succeeded', 'dead') AND OLD.backfill_state IN ('done', 'resolved') THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'immutability violation: processing row %/% cannot be removed', OLD.source, OLD.msg_id
            USING ERRCODE = 'OB202',
                  DETAIL = pg_catalog.format('state %s, backfill %s: only terminal rows whose mark is done or resolved may be archived',
                                             OLD.state, coalesce(OLD.backfill_state, 'none'));
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'immutability violation: TRUNCATE on mailbox.messages is not allowed' USING ERRCODE = 'OB202';
    END IF;
    IF (NEW.source, NEW.msg_id, NEW.message, NEW.received_at, NEW.enqueued_at)
       IS DISTINCT FROM (OLD.source, OLD.msg_id, OLD.message, OLD.received_at, OLD.enqueued_at) THEN
        RAISE EXCEPTION 'immutability violation: a processing row''s message never changes'
            USING ERRCODE = 'OB202', DETAIL = pg_catalog.format('processing row %s/%s', OLD.source, OLD.msg_id);
    END IF;
    IF OLD.state IN ('succeeded', 'dead', 'late') THEN
        IF (NEW.state, NEW.attempt, NEW.dead_reason, NEW.finished_at, NEW.lease_token)
           IS DISTINCT FROM (OLD.state, OLD.attempt, OLD.dead_reason, OLD.finished_at, OLD.lease_token) THEN
            RAISE EXCEPTION 'immutability violation: terminal state % of %/% never reverts', OLD.state, OLD.source, OLD.msg_id
                USING ERRCODE = 'OB202', DETAIL = 'SUCCEEDED, DEAD and late rows are final (SPEC R-MX-6)';
        END IF;
    END IF;
    IF NEW.backfill_state IS DISTINCT FROM OLD.backfill_state
       AND NOT ((OLD.backfill_state IS NULL AND NEW.backfill_state = 'owed' AND NEW.state IN ('succeeded', 'dead'))
                OR (OLD.backfill_state = 'owed' AND NEW.backfill_state IN ('done', 'abandoned'))
                OR (OLD.backfill_state = 'abandoned' AND NEW.backfill_state = 'resolved')) THEN
        RAISE EXCEPTION 'immutability violation: backfill % -> % of %/% is not allowed',
                        coalesce(OLD.backfill_state, 'none'), coalesce(NEW.backfill_state, 'none'), OLD.source, OLD.msg_id
            USING ERRCODE = 'OB202', DETAIL = 'the backfill fact moves owed -> done | abandoned, abandoned -> resolved (SPEC R-MX-8)';
    END IF;
    RETURN NEW;
END
$fn$;
REVOKE ALL ON FUNCTION mailbox.tg_mailbox_messages__terminal_immutable() FROM PUBLIC;

CREATE TRIGGER tg_mailbox_messages__terminal_immutable BEFORE UPDATE OR DELETE ON mailbox.messages
    FOR EACH ROW EXECUTE FUNCTION mailbox.tg_mailbox_messages__terminal_immutable();
CREATE TRIGGER tg_mailbox_messages__terminal_immutable_truncate BEFORE TRUNCATE ON mailbox.messages
    FOR EACH STATEMENT EXECUTE FUNCTION mailbox.tg_mailbox_messages__terminal_immutable();

-- tg_mailbox_backfill_resolutions__append_only: an operator's resolution of an abandoned
-- backfill is an immutable audit row (SPEC R-MX-8). UPDATE, DELETE, TRUNCATE raise OB202.
CREATE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on mailbox.backfill_resolutions is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'resolutions are append-only audit rows (SPEC R-MX-8)';
END
$fn$;
REVOKE ALL ON FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only() FROM PUBLIC;

CREATE TRIGGER tg_mailbox_backfill_resolutions__append_only BEFORE UPDATE OR DELETE ON mailbox.backfill_resolutions
    FOR EACH ROW EXECUTE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only();
CREATE TRIGGER tg_mailbox_backfill_resolutions__append_only_truncate BEFORE TRUNCATE ON mailbox.backfill_resolutions
    FOR EACH STATEMENT EXECUTE FUNCTION mailbox.tg_mailbox_backfill_resolutions__append_only();


-- Private helpers (granted to nobody).
-- mailbox._mailbox_source(p_source text, p_lock boolean) RETURNS mailbox.sources
-- (private, SPEC §10, D-4)
-- Purpose: the registered source row of p_source; with p_lock the row is locked FOR UPDATE
--   (record_discovery serializes on it: W and the holes of one source change under that row
--   lock, never under an advisory lock, R-SEC-5).
-- SQLSTATEs: 22023 p_source not a literal (^[a-z0-9][a-z0-9._@-]*$, at most 200 characters) or
--   not registered.
-- Caller: the mailbox functions; granted to nobody.
CREATE FUNCTION mailbox._mailbox_source(p_source text, p_lock boolean)
RETURNS mailbox.sources
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_row mailbox.sources;
BEGIN
    IF p_source IS NULL OR p_source !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_source) > 200 THEN
        RAISE EXCEPTION 'mailbox: invalid source'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('source %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_source);
    END IF;
    IF p_lock THEN
        SELECT s.* INTO v_row FROM mailbox.sources AS s WHERE s.source = p_source FOR UPDATE;
    ELSE
        SELECT s.* INTO v_row FROM mailbox.sources AS s WHERE s.source = p_source;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mailbox: unknown source'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('source %L is not registered (mailbox.register_source)', p_source);
    END IF;
    RETURN v_row;
END
$fn$;
COMMENT ON FUNCTION mailbox._mailbox_source(text, boolean) IS
    'Private: the registered source row (optionally locked FOR UPDATE); 22023 for an invalid or unknown source.';
REVOKE ALL ON FUNCTION mailbox._mailbox_source(text, boolean) FROM PUBLIC;

-- mailbox._mailbox_require_pump(p_source text) RETURNS void  (private, SPEC R-MX-11, R-SEC-5)
-- Purpose: the guard of every mutating mailbox function: while a live session holds the
--   source's pump (mailbox.acquire_pump), any other session is refused with OB403. A source
--   nobody holds (or whose holder session has ended) may be driven by any mailbox caller (tests,
--   a one-shot operator run); the pump itself always acquires first.
-- Locking: the holder row is read FOR SHARE, so an acquire_pump of another session (FOR UPDATE)
--   waits until this transaction ends: a mutation started without a holder never interleaves
--   with a new holder's work (INV-18: processing and sweeps are mutually exclusive). Row locks
--   only; no advisory lock (R-SEC-5: an outside role cannot take or block this lock because it
--   has no privilege on the table).
-- Liveness: the holder is this session when holder_pid = pg_backend_pid() (a dead earlier
--   session with the same pid is dead by definition: the pid is ours now); another pid is live
--   only if pg_stat_activity shows that pid with the recorded backend_start.
-- SQLSTATEs: OB403 another live session holds the pump of p_source.
-- Caller: the mailbox functions; granted to nobody.
CREATE FUNCTION mailbox._mailbox_require_pump(p_source text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_pid   integer;
    v_start timestamptz;
BEGIN
    SELECT h.holder_pid, h.holder_backend_start INTO v_pid, v_start
      FROM mailbox.pump_holders AS h WHERE h.source = p_source FOR SHARE;
    IF v_pid IS NULL OR v_pid = pg_catalog.pg_backend_pid() THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity AS a WHERE a.pid = v_pid AND a.backend_start = v_start) THEN
        RAISE EXCEPTION 'mailbox pump lock not held by this session'
            USING ERRCODE = 'OB403',
                  DETAIL = pg_catalog.format('source %s is held by the live session pid %s (started %s)', p_source, v_pid, v_start),
                  HINT = 'only the session that holds the pump (mailbox.acquire_pump) may change this source while it runs';
    END IF;
END
$fn$;
COMMENT ON FUNCTION mailbox._mailbox_require_pump(text) IS
    'Private: OB403 when another live session (pid + backend_start) holds the pump of the source (SPEC R-MX-11).';
REVOKE ALL ON FUNCTION mailbox._mailbox_require_pump(text) FROM PUBLIC;

-- mailbox._mailbox_fence_fail(p_source text, p_msg_id bigint, p_lease_token uuid, p_now timestamptz, p_call text)
-- RETURNS void  (private, SPEC R-MX-6, §13)
-- Purpose: called when an outcome's compare-and-set found no live leased head; raises the
--   precise error: OB402 for a row that is terminal, late or missing (an outcome for a row in
--   the wrong state), OB001 for a stale, expired or foreign lease token. Always raises.
-- Caller: complete_head, fail_head; granted to nobody.
CREATE FUNCTION mailbox._mailbox_fence_fail(p_source text, p_msg_id bigint, p_lease_token uuid, p_now timestamptz, p_call text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_row mailbox.messages;
BEGIN
    SELECT m.* INTO v_row FROM mailbox.messages AS m WHERE m.source = p_source AND m.msg_id = p_msg_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: mailbox outcome for a row in the wrong state', p_call
            USING ERRCODE = 'OB402', DETAIL = pg_catalog.format('source %s has no processing row %s', p_source, p_msg_id);
    END IF;
    IF v_row.state NOT IN ('pending', 'failed') THEN
        RAISE EXCEPTION '%: mailbox outcome for a row in the wrong state', p_call
            USING ERRCODE = 'OB402',
                  DETAIL = pg_catalog.format('processing row %s/%s is %s; terminal states never change (SPEC R-MX-6)', p_source, p_msg_id, v_row.state);
    END IF;
    RAISE EXCEPTION '%: fencing rejected', p_call
        USING ERRCODE = 'OB001',
              DETAIL = pg_catalog.format('processing row %s/%s: lease token %s is not the live lease (%s)', p_source, p_msg_id, p_lease_token,
                                         CASE WHEN v_row.lease_token IS NULL THEN 'not leased'
                                              WHEN v_row.lease_token IS DISTINCT FROM p_lease_token THEN 'another token'
                                              ELSE 'lease expired' END);
END
$fn$;
COMMENT ON FUNCTION mailbox._mailbox_fence_fail(text, bigint, uuid, timestamptz, text) IS
    'Private: raise OB402 (row missing/terminal/late) or OB001 (stale, expired or foreign lease) after a failed outcome CAS.';
REVOKE ALL ON FUNCTION mailbox._mailbox_fence_fail(text, bigint, uuid, timestamptz, text) FROM PUBLIC;


-- Public API (SPEC §13).
-- mailbox.register_source(p_source text, p_hole_release_after interval, p_backfill_deadline interval,
--   p_start_after bigint DEFAULT 0, p_head_backoff_base interval DEFAULT '1 second',
--   p_head_backoff_cap interval DEFAULT '5 minutes', p_max_attempts integer DEFAULT 10)
-- RETURNS void  (public, SPEC §10, §13, D-5)
-- Purpose: register a mailbox source, insert-or-compare: the same parameters again are a no-op;
--   other parameters for a registered source are refused (a source's configuration is fixed;
--   register a new source name to change it). W starts at p_start_after. Creates the source's
--   (empty) pump holder row.
-- Bounds: hole_release_after and backfill_deadline 1 second..30 days; start_after >= 0;
--   head_backoff_base 1 millisecond..1 hour, head_backoff_cap base..1 day; max_attempts 1..1000.
-- Locking: INSERT ... ON CONFLICT DO NOTHING, then the existing row is compared.
-- SQLSTATEs: 22023 invalid source literal or parameter out of range, or the source is registered
--   with other parameters.
-- Caller: outbox_registrar.
CREATE FUNCTION mailbox.register_source(p_source text, p_hole_release_after interval, p_backfill_deadline interval,
                                        p_start_after bigint DEFAULT 0,
                                        p_head_backoff_base interval DEFAULT '1 second',
                                        p_head_backoff_cap interval DEFAULT '5 minutes',
                                        p_max_attempts integer DEFAULT 10)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
DECLARE
    v_row mailbox.sources;
    v_bad text;
BEGIN
    IF p_source IS NULL OR p_source !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_source) > 200 THEN
        v_bad := pg_catalog.format('source %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_source);
    ELSIF p_hole_release_after IS NULL OR p_hole_release_after < interval '1 second' OR p_hole_release_after > interval '30 days' THEN
        v_bad := pg_catalog.format('hole_release_after %s is outside 1 second..30 days', p_hole_release_after);
    ELSIF p_backfill_deadline IS NULL OR p_backfill_deadline < interval '1 second' OR p_backfill_deadline > interval '30 days' THEN
        v_bad := pg_catalog.format('backfill_deadline %s is outside 1 second..30 days', p_backfill_deadline);
    ELSIF p_start_after IS NULL OR p_start_after < 0 THEN
        v_bad := pg_catalog.format('start_after %s must be >= 0', p_start_after);
    ELSIF p_head_backoff_base IS NULL OR p_head_backoff_base < interval '1 millisecond' OR p_head_backoff_base > interval '1 hour' THEN
        v_bad := pg_catalog.format('head_backoff_base %s is outside 1 millisecond..1 hour', p_head_backoff_base);
    ELSIF p_head_backoff_cap IS NULL OR p_head_backoff_cap < p_head_backoff_base OR p_head_backoff_cap > interval '1 day' THEN
        v_bad := pg_catalog.format('head_backoff_cap %s is outside head_backoff_base..1 day', p_head_backoff_cap);
    ELSIF p_max_attempts IS NULL OR p_max_attempts < 1 OR p_max_attempts > 1000 THEN
        v_bad := pg_catalog.format('max_attempts %s is outside 1..1000', p_max_attempts);
    END IF;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'register_source: invalid argument' USING ERRCODE = 'invalid_parameter_value', DETAIL = v_bad;
    END IF;

    INSERT INTO mailbox.sources AS s (source, hole_release_after, backfill_deadline, start_after, head_backoff_base,
                                      head_backoff_cap, max_attempts, watermark)
    VALUES (p_source, p_hole_release_after, p_backfill_deadline, p_start_after, p_head_backoff_base,
            p_head_backoff_cap, p_max_attempts, p_start_after)
    ON CONFLICT (source) DO NOTHING;
    IF FOUND THEN
        INSERT INTO mailbox.pump_holders (source) VALUES (p_source);
        RETURN;
    END IF;
    SELECT s.* INTO v_row FROM mailbox.sources AS s WHERE s.source = p_source;
    IF (v_row.hole_release_after, v_row.backfill_deadline, v_row.start_after, v_row.head_backoff_base,
        v_row.head_backoff_cap, v_row.max_attempts)
       IS DISTINCT FROM
       (p_hole_release_after, p_backfill_deadline, p_start_after, p_head_backoff_base, p_head_backoff_cap, p_max_attempts) THEN
        RAISE EXCEPTION 'register_source: source already registered with other parameters'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('source %s: hole_release_after %s, backfill_deadline %s, start_after %s, head_backoff %s..%s, max_attempts %s',
                                             p_source, v_row.hole_release_after, v_row.backfill_deadline, v_row.start_after,
                                             v_row.head_backoff_base, v_row.head_backoff_cap, v_row.max_attempts),
                  HINT = 'a source''s configuration is fixed at registration';
    END IF;
END
$fn$;
COMMENT ON FUNCTION mailbox.register_source(text, interval, interval, bigint, interval, interval, integer) IS
    'Register a mailbox source (insert-or-compare); W starts at start_after. 22023 on invalid arguments or other parameters for a registered source. SPEC §10, §13.';
REVOKE ALL ON FUNCTION mailbox.register_source(text, interval, interval, bigint, interval, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.register_source(text, interval, interval, bigint, interval, interval, integer) TO outbox_registrar;

-- mailbox.acquire_pump(p_source text) RETURNS boolean  (public, SPEC R-MX-11, R-SEC-5, §13)
-- Purpose: make this session the single active pump of p_source. true when this session now
--   holds it (first acquisition, heartbeat, or takeover of a dead holder's row); false when
--   another live session holds it. The hold ends with the session. No advisory lock: the hold is
--   a row of mailbox.pump_holders (pid + backend_start), locked FOR UPDATE while deciding.
-- Time: heartbeat_at = clock_timestamp() on every successful call.
-- SQLSTATEs: 22023 invalid or unknown source; 42501 when this session's own backend_start is not
--   visible to outbox_owner (pg_read_all_stats not granted to outbox_owner, see HINT).
-- Design notes (why no advisory lock, liveness): docs/mailbox.md#mailboxacquire_pump
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.acquire_pump(p_source text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_holder  mailbox.pump_holders;
    v_mystart timestamptz;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    SELECT a.backend_start INTO v_mystart FROM pg_catalog.pg_stat_activity AS a WHERE a.pid = pg_catalog.pg_backend_pid();
    IF v_mystart IS NULL THEN
        RAISE EXCEPTION 'acquire_pump: cannot identify this session'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'backend_start of this session is not visible to outbox_owner',
                  HINT = 'GRANT pg_read_all_stats TO outbox_owner (docs/mailbox.md)';
    END IF;
    SELECT h.* INTO v_holder FROM mailbox.pump_holders AS h WHERE h.source = p_source FOR UPDATE;
    IF v_holder.holder_pid IS NOT NULL
       AND NOT (v_holder.holder_pid = pg_catalog.pg_backend_pid() AND v_holder.holder_backend_start = v_mystart)
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity AS a
                    WHERE a.pid = v_holder.holder_pid AND a.backend_start = v_holder.holder_backend_start) THEN
        RETURN false;
    END IF;
    UPDATE mailbox.pump_holders AS h
       SET holder_pid = pg_catalog.pg_backend_pid(),
           holder_backend_start = v_mystart,
           holder_user = session_user,
           acquired_at = CASE WHEN h.holder_pid = pg_catalog.pg_backend_pid() AND h.holder_backend_start = v_mystart
                              THEN h.acquired_at ELSE v_now END,
           heartbeat_at = v_now
     WHERE h.source = p_source;
    RETURN true;
END
$fn$;
COMMENT ON FUNCTION mailbox.acquire_pump(text) IS
    'Make this session the single pump of the source for the rest of the session (holder row: pid + backend_start, liveness from pg_stat_activity; no advisory lock); false when another live session holds it. SPEC R-MX-11, R-SEC-5.';
REVOKE ALL ON FUNCTION mailbox.acquire_pump(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.acquire_pump(text) TO outbox_mailbox;

-- mailbox.record_discovery(p_source text, p_messages json)
-- RETURNS TABLE (watermark bigint, enqueued integer, open_holes integer, released_holes integer)
-- (public, SPEC R-MX-2, R-MX-4, R-MX-5, §13)
-- Purpose: record mailbox rows the pump read with msg_id > W (plus re-read ids of released holes)
--   and, in this ONE transaction, enqueue them, age and release holes and move W (R-MX-2).
--   p_messages = [{msgId, receivedAt, message}], at most 10000. The processed mark is never read.
-- Locking: the source row FOR UPDATE; the pump holder row FOR SHARE (OB403 guard).
-- SQLSTATEs: 22023 invalid source or input, or an unknown id at or below W outside a released
--   hole; OB401 a known id (or the same id twice) with a different message; OB403 another
--   session holds the pump.
-- Design notes (the six steps, cost, jit): docs/mailbox.md#mailboxrecord_discovery
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.record_discovery(p_source text, p_messages json)
RETURNS TABLE (watermark bigint, enqueued integer, open_holes integer, released_holes integer)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
SET jit = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_src       mailbox.sources;
    v_w         bigint;
    v_new_w     bigint;
    v_bad       text;
    v_id        bigint;
    v_ids       bigint[];
    v_rats      timestamptz[];
    v_msgs      jsonb[];
    v_h_first   bigint[];
    v_h_last    bigint[];
    v_h_seen    timestamptz[];
    v_h_rel     boolean[];
    v_enqueued  integer;
    v_open      numeric;
    v_released  numeric;
    v_max_above bigint;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    PERFORM mailbox._mailbox_require_pump(p_source);
    v_src := mailbox._mailbox_source(p_source, true);
    v_w := v_src.watermark;

    -- 1. input shape (set-based: the first problem in input order)
    IF p_messages IS NULL OR pg_catalog.json_typeof(p_messages) <> 'array' THEN
        RAISE EXCEPTION 'record_discovery: messages must be a JSON array'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('got %s', coalesce(pg_catalog.json_typeof(p_messages), 'NULL'));
    END IF;
    IF pg_catalog.json_array_length(p_messages) > 10000 THEN
        RAISE EXCEPTION 'record_discovery: too many messages'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('%s elements; at most 10000 per call', pg_catalog.json_array_length(p_messages));
    END IF;
    SELECT pg_catalog.format('element %s: %s', e.i, e.problem) INTO v_bad
      FROM (SELECT x.i,
                   CASE
                       WHEN pg_catalog.json_typeof(x.v) <> 'object' THEN 'not an object'
                       WHEN (SELECT pg_catalog.count(*) <> pg_catalog.count(DISTINCT k) FROM pg_catalog.json_object_keys(x.v) AS k)
                           THEN 'duplicate member'
                       WHEN EXISTS (SELECT 1 FROM pg_catalog.json_object_keys(x.v) AS k WHERE k NOT IN ('msgId', 'receivedAt', 'message'))
                           THEN 'unknown member (allowed: msgId, receivedAt, message)'
                       WHEN pg_catalog.json_typeof(x.v -> 'msgId') IS DISTINCT FROM 'number'
                            OR (x.v ->> 'msgId') !~ '^[0-9]{1,19}$'
                            OR (x.v ->> 'msgId')::numeric > 9223372036854775807
                           THEN 'msgId must be an integer 0..9223372036854775807'
                       WHEN pg_catalog.json_typeof(x.v -> 'receivedAt') NOT IN ('null', 'string')
                            OR (pg_catalog.json_typeof(x.v -> 'receivedAt') = 'string'
                                AND (x.v ->> 'receivedAt') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$')
                           THEN 'receivedAt must be an RFC 3339 date-time or null'
                       WHEN x.v -> 'message' IS NULL THEN 'message is missing'
                   END AS problem
              FROM pg_catalog.json_array_elements(p_messages) WITH ORDINALITY AS x(v, i)) AS e
     WHERE e.problem IS NOT NULL
     ORDER BY e.i
     LIMIT 1;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'record_discovery: invalid message row' USING ERRCODE = 'invalid_parameter_value', DETAIL = v_bad;
    END IF;

    -- parsed, one entry per id (the same id twice must carry the same message)
    BEGIN
        SELECT p.id INTO v_id
          FROM (SELECT (x.v ->> 'msgId')::bigint AS id, (x.v -> 'message')::jsonb AS msg
                  FROM pg_catalog.json_array_elements(p_messages) AS x(v)) AS p
         GROUP BY p.id HAVING pg_catalog.count(DISTINCT p.msg) > 1
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'mailbox message conflict'
                USING ERRCODE = 'OB401', DETAIL = pg_catalog.format('msg_id %s appears twice in the input with different messages', v_id);
        END IF;
        SELECT pg_catalog.array_agg(d.id ORDER BY d.id), pg_catalog.array_agg(d.rat ORDER BY d.id),
               pg_catalog.array_agg(d.msg ORDER BY d.id)
          INTO v_ids, v_rats, v_msgs
          FROM (SELECT DISTINCT ON (p.id) p.id, p.rat, p.msg
                  FROM (SELECT (x.v ->> 'msgId')::bigint AS id, (x.v ->> 'receivedAt')::timestamptz AS rat,
                               (x.v -> 'message')::jsonb AS msg, x.i
                          FROM pg_catalog.json_array_elements(p_messages) WITH ORDINALITY AS x(v, i)) AS p
                 ORDER BY p.id, p.i) AS d;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format OR invalid_time_zone_displacement_value THEN
        RAISE EXCEPTION 'record_discovery: invalid receivedAt'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = SQLERRM;
    END;
    v_ids := coalesce(v_ids, '{}');

    -- 2. known ids: same message no-op, other message OB401; unknown ids <= W only in released holes
    SELECT i.id INTO v_id
      FROM unnest(v_ids, v_msgs) AS i(id, msg)
      JOIN mailbox.messages AS m ON m.source = p_source AND m.msg_id = i.id
     WHERE m.message <> i.msg
     ORDER BY i.id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'mailbox message conflict'
            USING ERRCODE = 'OB401',
                  DETAIL = pg_catalog.format('source %s msg_id %s is known with a different message; nothing recorded', p_source, v_id);
    END IF;
    SELECT i.id INTO v_id
      FROM pg_catalog.unnest(v_ids) AS i(id)
     WHERE i.id <= v_w
       AND NOT EXISTS (SELECT 1 FROM mailbox.messages AS m WHERE m.source = p_source AND m.msg_id = i.id)
       AND NOT coalesce((SELECT h.released_at IS NOT NULL AND h.last_id >= i.id
                           FROM mailbox.holes AS h
                          WHERE h.source = p_source AND h.first_id <= i.id
                          ORDER BY h.first_id DESC LIMIT 1), false)
     ORDER BY i.id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'record_discovery: unknown id at or below the watermark'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('source %s msg_id %s <= watermark %s is neither known nor in a released hole (below the source''s start?)',
                                             p_source, v_id, v_w);
    END IF;

    -- 3. enqueue (pending above W, late inside a released hole)
    WITH ins AS (
        INSERT INTO mailbox.messages AS m (source, msg_id, message, received_at, enqueued_at, state)
        SELECT p_source, i.id, i.msg, i.rat, v_now, CASE WHEN i.id <= v_w THEN 'late' ELSE 'pending' END
          FROM unnest(v_ids, v_rats, v_msgs) AS i(id, rat, msg)
        ON CONFLICT (source, msg_id) DO NOTHING
        RETURNING m.state
    )
    SELECT pg_catalog.count(*) FILTER (WHERE ins.state = 'pending') INTO v_enqueued FROM ins;

    -- 4. + 5. the holes among the rows above W, their first-seen times and releases
    WITH r AS (
        SELECT m.msg_id, pg_catalog.lag(m.msg_id, 1, v_w) OVER (ORDER BY m.msg_id) AS prev
          FROM mailbox.messages AS m
         WHERE m.source = p_source AND m.msg_id > v_w
    ), gaps AS (
        SELECT r.prev + 1 AS first_id, r.msg_id - 1 AS last_id FROM r WHERE r.msg_id > r.prev + 1
    ), seen AS (
        SELECT g.first_id, g.last_id,
               coalesce((SELECT pg_catalog.min(h.first_seen_at) FROM mailbox.holes AS h
                          WHERE h.source = p_source AND h.released_at IS NULL
                            AND h.first_id <= g.last_id AND h.last_id >= g.first_id), v_now) AS first_seen_at
          FROM gaps AS g
    ), decided AS (
        SELECT s.first_id, s.last_id, s.first_seen_at,
               pg_catalog.bool_and(s.first_seen_at <= v_now - v_src.hole_release_after) OVER (ORDER BY s.first_id) AS release
          FROM seen AS s
    )
    SELECT pg_catalog.array_agg(d.first_id ORDER BY d.first_id), pg_catalog.array_agg(d.last_id ORDER BY d.first_id),
           pg_catalog.array_agg(d.first_seen_at ORDER BY d.first_id), pg_catalog.array_agg(d.release ORDER BY d.first_id),
           coalesce(pg_catalog.sum(d.last_id - d.first_id + 1) FILTER (WHERE NOT d.release), 0),
           coalesce(pg_catalog.sum(d.last_id - d.first_id + 1) FILTER (WHERE d.release), 0),
           pg_catalog.min(d.first_id) FILTER (WHERE NOT d.release)
      INTO v_h_first, v_h_last, v_h_seen, v_h_rel, v_open, v_released, v_new_w
      FROM decided AS d;

    DELETE FROM mailbox.holes AS h WHERE h.source = p_source AND h.released_at IS NULL;
    INSERT INTO mailbox.holes (source, first_id, last_id, first_seen_at, released_at)
    SELECT p_source, g.f, g.l, g.s, CASE WHEN g.rel THEN v_now END
      FROM unnest(v_h_first, v_h_last, v_h_seen, v_h_rel) AS g(f, l, s, rel);

    -- 6. W
    IF v_new_w IS NOT NULL THEN
        v_new_w := v_new_w - 1;
    ELSE
        SELECT pg_catalog.max(m.msg_id) INTO v_max_above FROM mailbox.messages AS m WHERE m.source = p_source AND m.msg_id > v_w;
        v_new_w := coalesce(v_max_above, v_w);
    END IF;
    UPDATE mailbox.sources AS s
       SET watermark = v_new_w,
           watermark_advanced_at = CASE WHEN v_new_w > v_w THEN v_now ELSE s.watermark_advanced_at END,
           last_discovery_at = v_now
     WHERE s.source = p_source;

    watermark := v_new_w;
    enqueued := v_enqueued;
    open_holes := least(v_open, 2147483647)::integer;
    released_holes := least(v_released, 2147483647)::integer;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION mailbox.record_discovery(text, json) IS
    'Enqueue mailbox rows read with msg_id > W and advance W over the contiguous prefix in one transaction; holes (ranges, our clock) are released after hole_release_after, skipping only hole ids; rows inside released holes are recorded as late. OB401 message conflict, 22023 invalid input, OB403 pump held elsewhere. SPEC R-MX-2, R-MX-4, R-MX-5.';
REVOKE ALL ON FUNCTION mailbox.record_discovery(text, json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.record_discovery(text, json) TO outbox_mailbox;

-- mailbox.released_holes(p_source text, p_within interval, p_max_ranges integer DEFAULT 1000)
-- RETURNS TABLE (first_id bigint, last_id bigint, released_at timestamptz)  (public, SPEC R-MX-2)
-- Purpose: the hole ranges of p_source released within p_within before now (newest first, at
--   most p_max_ranges): the pump re-reads these ids in the mailbox for a while, so a row that
--   commits inside a released hole is found and recorded as late (record_discovery), never
--   enqueued out of order silently. Read-only.
-- SQLSTATEs: 22023 invalid or unknown source, p_within outside 0..30 days, p_max_ranges outside
--   1..10000.
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.released_holes(p_source text, p_within interval, p_max_ranges integer DEFAULT 1000)
RETURNS TABLE (first_id bigint, last_id bigint, released_at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_within IS NULL OR p_within < interval '0' OR p_within > interval '30 days' THEN
        RAISE EXCEPTION 'released_holes: invalid window'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('within %s is outside 0..30 days', p_within);
    END IF;
    IF p_max_ranges IS NULL OR p_max_ranges < 1 OR p_max_ranges > 10000 THEN
        RAISE EXCEPTION 'released_holes: invalid max_ranges'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('max_ranges %s is outside 1..10000', p_max_ranges);
    END IF;
    RETURN QUERY
    SELECT h.first_id, h.last_id, h.released_at
      FROM mailbox.holes AS h
     WHERE h.source = p_source AND h.released_at IS NOT NULL
       AND h.released_at >= pg_catalog.clock_timestamp() - p_within
     ORDER BY h.released_at DESC, h.first_id
     LIMIT p_max_ranges;
END
$fn$;
COMMENT ON FUNCTION mailbox.released_holes(text, interval, integer) IS
    'Hole ranges released within the window (newest first): the ids the pump re-reads to find late rows. SPEC R-MX-2.';
REVOKE ALL ON FUNCTION mailbox.released_holes(text, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.released_holes(text, interval, integer) TO outbox_mailbox;

-- mailbox.claim_head(p_source text, p_worker text, p_lease interval)
-- RETURNS TABLE (msg_id bigint, message jsonb, attempt integer, lease_token uuid)
-- (public, SPEC R-MX-3, R-MX-4, §13)
-- Purpose: lease the single executable head of p_source (the smallest unfinished msg_id <= W),
--   if it is due; a head that is not due returns no row and nothing behind it is ever returned
--   (one FIFO head). attempt + 1 and a new lease token on every claim.
-- Cost: one index probe - O(1) whatever the history, so maintenance never starves the head.
-- Locking: the head row FOR UPDATE; the pump holder row FOR SHARE (OB403 guard).
-- Time: clock_timestamp() once per call.
-- SQLSTATEs: 22023 invalid or unknown source, worker not a literal, lease outside
--   1 second..1 hour; OB403 another session holds the pump.
-- Design notes: docs/mailbox.md#mailboxclaim_head
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.claim_head(p_source text, p_worker text, p_lease interval)
RETURNS TABLE (msg_id bigint, message jsonb, attempt integer, lease_token uuid)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now  timestamptz := pg_catalog.clock_timestamp();
    v_src  mailbox.sources;
    v_head mailbox.messages;
BEGIN
    v_src := mailbox._mailbox_source(p_source, false);
    IF p_worker IS NULL OR p_worker !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_worker) > 200 THEN
        RAISE EXCEPTION 'claim_head: invalid worker'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('worker %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_worker);
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'claim_head: invalid lease'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('lease %s is outside 1 second..1 hour', p_lease);
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);

    SELECT m.* INTO v_head
      FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.state IN ('pending', 'failed')
     ORDER BY m.msg_id
     LIMIT 1
       FOR UPDATE;
    IF NOT FOUND OR v_head.msg_id > v_src.watermark
       OR (v_head.lease_expires_at IS NOT NULL AND v_head.lease_expires_at > v_now)
       OR v_head.available_at > v_now THEN
        RETURN;
    END IF;

    RETURN QUERY
    UPDATE mailbox.messages AS m
       SET attempt = m.attempt + 1,
           lease_owner = p_worker,
           lease_token = pg_catalog.gen_random_uuid(),
           lease_expires_at = v_now + p_lease
     WHERE m.source = p_source AND m.msg_id = v_head.msg_id
    RETURNING m.msg_id, m.message, m.attempt, m.lease_token;
END
$fn$;
COMMENT ON FUNCTION mailbox.claim_head(text, text, interval) IS
    'Lease the single executable head (smallest pending/failed msg_id <= W) when due; nothing behind it is ever returned. SPEC R-MX-3, R-MX-4.';
REVOKE ALL ON FUNCTION mailbox.claim_head(text, text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.claim_head(text, text, interval) TO outbox_mailbox;

-- mailbox.apply_reference_effect(p_source text, p_msg_id bigint, p_lease_token uuid, p_identity text,
--   p_key text, p_type text) RETURNS TABLE (outcome text, revision bigint)
-- (public, SPEC R-MX-9, R-MX-10; the reference handler's business effect)
-- Purpose: the business write of the reference handler, inside the handler's transaction: one
--   effective record per business identity (R-MX-9): a new identity -> (applied, the key's next
--   revision); an identity already bound -> (duplicate, its revision), nothing changed.
-- Fencing: only the live lease of the head may write (else OB001/OB402).
-- Locking: the head row FOR UPDATE; the key's sequence row (INSERT ... ON CONFLICT DO UPDATE).
-- SQLSTATEs: 22023 identity (1..200), key (1..200 characters) or type (a literal) invalid;
--   OB001; OB402; OB403.
-- Design notes: docs/mailbox.md#mailboxapply_reference_effect
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.apply_reference_effect(p_source text, p_msg_id bigint, p_lease_token uuid, p_identity text,
                                               p_key text, p_type text)
RETURNS TABLE (outcome text, revision bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_rev bigint;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_identity IS NULL OR pg_catalog.length(p_identity) NOT BETWEEN 1 AND 200
       OR p_key IS NULL OR pg_catalog.length(p_key) NOT BETWEEN 1 AND 200
       OR p_type IS NULL OR p_type !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_type) > 200 THEN
        RAISE EXCEPTION 'apply_reference_effect: invalid argument'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'identity and key need 1..200 characters, type must match ^[a-z0-9][a-z0-9._@-]*$';
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);
    PERFORM 1 FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.msg_id = p_msg_id AND m.state IN ('pending', 'failed')
       AND m.lease_token = p_lease_token AND m.lease_expires_at > v_now
       FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM mailbox._mailbox_fence_fail(p_source, p_msg_id, p_lease_token, v_now, 'apply_reference_effect');
    END IF;

    SELECT e.revision INTO v_rev FROM mailbox.ref_effects AS e WHERE e.source = p_source AND e.identity = p_identity;
    IF FOUND THEN
        outcome := 'duplicate';
        revision := v_rev;
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO mailbox.ref_key_sequences AS ks (source, key, last_revision) VALUES (p_source, p_key, 1)
    ON CONFLICT (source, key) DO UPDATE SET last_revision = ks.last_revision + 1
    RETURNING ks.last_revision INTO v_rev;
    INSERT INTO mailbox.ref_effects (source, identity, msg_id, key, revision, type, applied_at)
    VALUES (p_source, p_identity, p_msg_id, p_key, v_rev, p_type, v_now);
    outcome := 'applied';
    revision := v_rev;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION mailbox.apply_reference_effect(text, bigint, uuid, text, text, text) IS
    'Reference handler business effect: bind a business identity once (applied with the key''s next sequence, or duplicate), fenced by the head''s live lease. SPEC R-MX-9, R-MX-10.';
REVOKE ALL ON FUNCTION mailbox.apply_reference_effect(text, bigint, uuid, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.apply_reference_effect(text, bigint, uuid, text, text, text) TO outbox_mailbox;

-- mailbox.complete_head(p_source text, p_msg_id bigint, p_lease_token uuid, p_outcome text,
--   p_reason text DEFAULT NULL) RETURNS void  (public, SPEC R-MX-6, R-MX-8, R-MX-10, §13)
-- Purpose: finish the leased head inside the handler's transaction (business effect and outbound
--   events commit or roll back with it, R-MX-10). ONE statement writes the terminal state
--   (succeeded, or dead with p_reason) AND the backfill intent (owed, R-MX-8). Terminal states
--   never revert (trigger, R-MX-6). Fenced by source + msg_id + lease token + a live lease.
-- Time: clock_timestamp() once per call.
-- SQLSTATEs: 22023 invalid source, outcome not succeeded|dead, reason missing/too long/given
--   for succeeded; OB001 stale/expired/foreign token; OB402 terminal, late or missing row;
--   OB403 another session holds the pump.
-- Design notes: docs/mailbox.md#mailboxcomplete_head
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.complete_head(p_source text, p_msg_id bigint, p_lease_token uuid, p_outcome text,
                                      p_reason text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
DECLARE
    v_now    timestamptz := pg_catalog.clock_timestamp();
    v_reason text;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'dead') THEN
        RAISE EXCEPTION 'complete_head: invalid outcome'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('outcome %L must be succeeded or dead', p_outcome);
    END IF;
    IF p_outcome = 'succeeded' AND p_reason IS NOT NULL THEN
        RAISE EXCEPTION 'complete_head: a reason is only for dead'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'pass reason NULL with outcome succeeded';
    END IF;
    IF p_outcome = 'dead' THEN
        v_reason := pg_catalog.btrim(pg_catalog.regexp_replace(coalesce(p_reason, ''), '[[:cntrl:]]', ' ', 'g'));
        IF v_reason = '' OR pg_catalog.length(v_reason) > 500 THEN
            RAISE EXCEPTION 'complete_head: invalid reason'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = 'a dead letter needs a reason of 1..500 characters';
        END IF;
    END IF;
    IF p_msg_id IS NULL OR p_lease_token IS NULL THEN
        RAISE EXCEPTION 'complete_head: msg_id and lease_token are required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);

    UPDATE mailbox.messages AS m
       SET state = p_outcome,
           dead_reason = v_reason,
           finished_at = v_now,
           lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
           backfill_state = 'owed',
           backfill_next_at = v_now
     WHERE m.source = p_source AND m.msg_id = p_msg_id
       AND m.state IN ('pending', 'failed')
       AND m.lease_token = p_lease_token AND m.lease_expires_at > v_now;
    IF NOT FOUND THEN
        PERFORM mailbox._mailbox_fence_fail(p_source, p_msg_id, p_lease_token, v_now, 'complete_head');
    END IF;
END
$fn$;
COMMENT ON FUNCTION mailbox.complete_head(text, bigint, uuid, text, text) IS
    'Finish the leased head (succeeded | dead with reason) and record the backfill intent in the same statement, inside the handler''s transaction. OB001 stale lease, OB402 wrong state, OB403 pump held elsewhere. SPEC R-MX-6, R-MX-8, R-MX-10.';
REVOKE ALL ON FUNCTION mailbox.complete_head(text, bigint, uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.complete_head(text, bigint, uuid, text, text) TO outbox_mailbox;

-- mailbox.fail_head(p_source text, p_msg_id bigint, p_lease_token uuid, p_error_code text)
-- RETURNS text  (public, SPEC R-MX-3, R-MX-6, R-MX-10, §13)
-- Purpose: record a failed attempt of the leased head (after the handler's transaction rolled
--   back; call it in a transaction of its own). A retryable error code (outbox.error_codes,
--   R-AK-7) makes the row failed, due again after least(cap, base * 2^(attempt-1)) - it keeps
--   the head meanwhile, so nothing behind it is processed (R-MX-3); at max_attempts it becomes
--   dead with reason retry_exhausted. A non-retryable code makes it dead at once with the code
--   as reason. A dead row owes its backfill from the same statement (R-MX-8). Returns failed or
--   dead.
-- Fencing: as complete_head (OB001 stale/expired/foreign token, OB402 wrong state).
-- Time: now = clock_timestamp() captured once per call.
-- SQLSTATEs: 22023 invalid source or unknown error code; OB001; OB402; OB403.
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.fail_head(p_source text, p_msg_id bigint, p_lease_token uuid, p_error_code text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_src       mailbox.sources;
    v_retryable boolean;
    v_attempt   integer;
    v_dead      boolean;
    v_reason    text;
    v_delay     numeric;
BEGIN
    v_src := mailbox._mailbox_source(p_source, false);
    SELECT ec.retryable INTO v_retryable FROM outbox.error_codes AS ec WHERE ec.code = p_error_code;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fail_head: unknown error code'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('error code %L is not in outbox.error_codes (SPEC R-AK-7)', p_error_code);
    END IF;
    IF p_msg_id IS NULL OR p_lease_token IS NULL THEN
        RAISE EXCEPTION 'fail_head: msg_id and lease_token are required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);

    SELECT m.attempt INTO v_attempt
      FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.msg_id = p_msg_id
       AND m.state IN ('pending', 'failed')
       AND m.lease_token = p_lease_token AND m.lease_expires_at > v_now
       FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM mailbox._mailbox_fence_fail(p_source, p_msg_id, p_lease_token, v_now, 'fail_head');
    END IF;
    v_dead := NOT v_retryable OR v_attempt >= v_src.max_attempts;
    v_reason := CASE WHEN NOT v_retryable THEN p_error_code WHEN v_dead THEN 'retry_exhausted' END;
    v_delay := least(pg_catalog.date_part('epoch', v_src.head_backoff_cap)::numeric,
                     pg_catalog.date_part('epoch', v_src.head_backoff_base)::numeric
                     * pg_catalog.power(2::numeric, least(greatest(v_attempt - 1, 0), 60)));

    UPDATE mailbox.messages AS m
       SET state = CASE WHEN v_dead THEN 'dead' ELSE 'failed' END,
           last_error_code = p_error_code,
           dead_reason = v_reason,
           finished_at = CASE WHEN v_dead THEN v_now END,
           available_at = CASE WHEN v_dead THEN m.available_at ELSE v_now + pg_catalog.make_interval(secs => v_delay::double precision) END,
           lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
           backfill_state = CASE WHEN v_dead THEN 'owed' END,
           backfill_next_at = CASE WHEN v_dead THEN v_now END
     WHERE m.source = p_source AND m.msg_id = p_msg_id;
    RETURN CASE WHEN v_dead THEN 'dead' ELSE 'failed' END;
END
$fn$;
COMMENT ON FUNCTION mailbox.fail_head(text, bigint, uuid, text) IS
    'Record a failed attempt of the leased head: failed with backoff least(cap, base*2^(attempt-1)) holding the head, or dead (retry_exhausted at max_attempts, or the non-retryable code) with the backfill intent in the same statement. SPEC R-MX-3, R-MX-6.';
REVOKE ALL ON FUNCTION mailbox.fail_head(text, bigint, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.fail_head(text, bigint, uuid, text) TO outbox_mailbox;

-- mailbox.claim_backfill(p_source text, p_batch integer) RETURNS SETOF bigint
-- (public, SPEC R-MX-7, R-MX-8, §13)
-- Purpose: the msg_ids of terminal rows that owe the processed mark, not done, not abandoned,
--   due (a transient failure backs off, see record_backfill), oldest id first, at most p_batch.
--   Only terminal rows can owe a mark, so PENDING/FAILED rows are never marked (R-MX-8).
--   No lease: writing the mark is idempotent (empty -> timestamp, never overwrite).
-- Cost: index messages_backfill_owed (source, msg_id) WHERE backfill_state = 'owed'.
-- SQLSTATEs: 22023 invalid source, batch outside 1..1000; OB403 another session holds the pump.
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.claim_backfill(p_source text, p_batch integer)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_batch IS NULL OR p_batch < 1 OR p_batch > 1000 THEN
        RAISE EXCEPTION 'claim_backfill: invalid batch'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('batch %s is outside 1..1000', p_batch);
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);
    RETURN QUERY
    SELECT m.msg_id
      FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.backfill_state = 'owed'
       AND m.backfill_next_at <= pg_catalog.clock_timestamp()
     ORDER BY m.msg_id
     LIMIT p_batch;
END
$fn$;
COMMENT ON FUNCTION mailbox.claim_backfill(text, integer) IS
    'Terminal rows owing the processed mark (due, oldest first). SPEC R-MX-8.';
REVOKE ALL ON FUNCTION mailbox.claim_backfill(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.claim_backfill(text, integer) TO outbox_mailbox;

-- mailbox.record_backfill(p_source text, p_msg_id bigint, p_outcome text) RETURNS text
-- (public, SPEC R-MX-7, R-MX-8, §13)
-- Purpose: record what writing the processed mark in the mailbox did: written or already_marked
--   (done), missing (abandoned at once), transient (retry with backoff, or abandoned once
--   backfill_deadline has passed since OUR enqueue time). An abandoned row stays abandoned until
--   an operator resolves it (resolve_abandoned); it never counts as marked.
-- Locking: the processing row FOR UPDATE. Time: clock_timestamp() once per call.
-- SQLSTATEs: 22023 invalid source or outcome; OB402 the row owes no backfill (missing, not
--   terminal, already done or abandoned); OB403 another session holds the pump.
-- Design notes: docs/mailbox.md#mailboxrecord_backfill
-- Caller: outbox_mailbox.
CREATE FUNCTION mailbox.record_backfill(p_source text, p_msg_id bigint, p_outcome text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_src mailbox.sources;
    v_row mailbox.messages;
    v_res text;
BEGIN
    v_src := mailbox._mailbox_source(p_source, false);
    IF p_outcome IS NULL OR p_outcome NOT IN ('written', 'already_marked', 'missing', 'transient') THEN
        RAISE EXCEPTION 'record_backfill: invalid outcome'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('outcome %L must be written, already_marked, missing or transient', p_outcome);
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);
    SELECT m.* INTO v_row FROM mailbox.messages AS m WHERE m.source = p_source AND m.msg_id = p_msg_id FOR UPDATE;
    IF NOT FOUND OR v_row.backfill_state IS DISTINCT FROM 'owed' THEN
        RAISE EXCEPTION 'record_backfill: mailbox outcome for a row in the wrong state'
            USING ERRCODE = 'OB402',
                  DETAIL = pg_catalog.format('processing row %s/%s owes no backfill (%s)', p_source, p_msg_id,
                                             CASE WHEN v_row.msg_id IS NULL THEN 'no such row'
                                                  ELSE 'state ' || v_row.state || ', backfill ' || coalesce(v_row.backfill_state, 'none') END);
    END IF;
    v_res := CASE
        WHEN p_outcome IN ('written', 'already_marked') THEN 'done'
        WHEN p_outcome = 'missing' THEN 'abandoned'
        WHEN v_now >= v_row.enqueued_at + v_src.backfill_deadline THEN 'abandoned'
        ELSE 'retry' END;
    UPDATE mailbox.messages AS m
       SET backfill_state = CASE v_res WHEN 'retry' THEN 'owed' ELSE v_res END,
           backfill_outcome = p_outcome,
           backfill_attempts = m.backfill_attempts + 1,
           backfill_next_at = CASE WHEN v_res = 'retry'
                                   THEN v_now + pg_catalog.make_interval(secs => least(60, pg_catalog.power(2, least(m.backfill_attempts, 10)))::double precision)
                                   ELSE m.backfill_next_at END,
           backfill_done_at = CASE WHEN v_res = 'done' THEN v_now END,
           abandon_reason = CASE WHEN v_res = 'abandoned' THEN CASE p_outcome WHEN 'missing' THEN 'missing' ELSE 'deadline' END END,
           abandoned_at = CASE WHEN v_res = 'abandoned' THEN v_now END
     WHERE m.source = p_source AND m.msg_id = p_msg_id;
    IF v_res = 'abandoned' THEN
        RAISE WARNING 'mailbox backfill abandoned: source %, msg_id %, reason %', p_source, p_msg_id,
                      CASE p_outcome WHEN 'missing' THEN 'mailbox row missing' ELSE 'transient failures past backfill_deadline' END;
    END IF;
    RETURN v_res;
END
$fn$;
COMMENT ON FUNCTION mailbox.record_backfill(text, bigint, text) IS
    'Record a backfill outcome: written/already_marked -> done, missing -> abandoned, transient -> retry until backfill_deadline from our enqueue time, then abandoned. OB402 when the row owes no backfill. SPEC R-MX-7, R-MX-8.';
REVOKE ALL ON FUNCTION mailbox.record_backfill(text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.record_backfill(text, bigint, text) TO outbox_mailbox;

-- mailbox.resolve_abandoned(p_source text, p_msg_id bigint, p_resolution text, p_note text)
-- RETURNS void  (public, SPEC R-MX-8, §13)
-- Purpose: an operator's reconciliation of an abandoned backfill (`outboxctl mailbox resolve`):
--   marked_manually (the operator set the mark in the mailbox) or not_needed (the mailbox row
--   is gone or needs no mark). Writes one immutable audit row (who: session_user, when, note)
--   and moves the row's backfill from abandoned to resolved; only then may the processing row be
--   archived. Automatic retries never resume.
-- Not guarded by the pump hold (OB403): the pump never touches abandoned rows, so an operator
--   resolves while it runs; the row lock serializes with a concurrent record_backfill.
-- Locking: the processing row FOR UPDATE.
-- SQLSTATEs: 22023 invalid source, resolution, or note (1..500 characters after trimming);
--   OB402 the row is not an abandoned backfill.
-- Caller: outbox_mailbox (an operator's login granted that role).
CREATE FUNCTION mailbox.resolve_abandoned(p_source text, p_msg_id bigint, p_resolution text, p_note text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
DECLARE
    v_now   timestamptz := pg_catalog.clock_timestamp();
    v_note  text := pg_catalog.btrim(pg_catalog.regexp_replace(coalesce(p_note, ''), '[[:cntrl:]]', ' ', 'g'));
    v_state text;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_resolution IS NULL OR p_resolution NOT IN ('marked_manually', 'not_needed') THEN
        RAISE EXCEPTION 'resolve_abandoned: invalid resolution'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('resolution %L must be marked_manually or not_needed', p_resolution);
    END IF;
    IF v_note = '' OR pg_catalog.length(v_note) > 500 THEN
        RAISE EXCEPTION 'resolve_abandoned: invalid note'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'a note of 1..500 characters is required (the audit reads it)';
    END IF;
    SELECT m.backfill_state INTO v_state FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.msg_id = p_msg_id FOR UPDATE;
    IF v_state IS DISTINCT FROM 'abandoned' THEN
        RAISE EXCEPTION 'resolve_abandoned: mailbox outcome for a row in the wrong state'
            USING ERRCODE = 'OB402',
                  DETAIL = pg_catalog.format('processing row %s/%s is not an abandoned backfill (%s)', p_source, p_msg_id,
                                             coalesce(v_state, 'no such row or no backfill owed'));
    END IF;
    INSERT INTO mailbox.backfill_resolutions (source, msg_id, resolution, note, resolved_by, resolved_at)
    VALUES (p_source, p_msg_id, p_resolution, v_note, session_user, v_now);
    UPDATE mailbox.messages AS m SET backfill_state = 'resolved'
     WHERE m.source = p_source AND m.msg_id = p_msg_id;
END
$fn$;
COMMENT ON FUNCTION mailbox.resolve_abandoned(text, bigint, text, text) IS
    'Operator: resolve an abandoned backfill (marked_manually | not_needed) with an audited note; OB402 when the row is not abandoned. SPEC R-MX-8.';
REVOKE ALL ON FUNCTION mailbox.resolve_abandoned(text, bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.resolve_abandoned(text, bigint, text, text) TO outbox_mailbox;

-- mailbox.pipeline_status(p_source text)
-- RETURNS TABLE (watermark bigint, lag_ids bigint, lag_seconds double precision, open_holes integer,
--   released_holes integer, late_rows integer, head_msg_id bigint, head_state text,
--   oldest_unmarked_terminal_seconds double precision, abandoned_backfills integer, dead_letters integer)
-- (public, SPEC R-MX-12, §13)
-- Purpose: the operator's view of one source (outboxctl mailbox status, pump metrics): W, the
--   backlog and its age, holes, late rows, the head and its state, owed and abandoned marks,
--   dead letters. Read-only; one snapshot.
-- Cost: partial indexes (unfinished, owed, attention); hole ranges.
-- SQLSTATEs: 22023 invalid or unknown source.
-- Design notes (each column): docs/mailbox.md#mailboxpipeline_status
-- Caller: outbox_mailbox, outbox_auditor.
CREATE FUNCTION mailbox.pipeline_status(p_source text)
RETURNS TABLE (watermark bigint, lag_ids bigint, lag_seconds double precision, open_holes integer,
               released_holes integer, late_rows integer, head_msg_id bigint, head_state text,
               oldest_unmarked_terminal_seconds double precision, abandoned_backfills integer, dead_letters integer)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, mailbox, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
    v_src mailbox.sources;
BEGIN
    v_src := mailbox._mailbox_source(p_source, false);
    RETURN QUERY
    SELECT v_src.watermark,
           u.n,
           coalesce(pg_catalog.date_part('epoch', v_now - u.oldest), 0)::double precision,
           least(coalesce(hs.open_ids, 0), 2147483647)::integer,
           least(coalesce(hs.released_ids, 0), 2147483647)::integer,
           (SELECT pg_catalog.count(*)::integer FROM mailbox.messages AS m WHERE m.source = p_source AND m.state = 'late'),
           hd.msg_id,
           CASE WHEN hd.msg_id IS NULL THEN NULL
                WHEN hd.lease_expires_at > v_now THEN 'leased'
                ELSE hd.state END,
           coalesce((SELECT pg_catalog.date_part('epoch', v_now - pg_catalog.min(m.finished_at))
                       FROM mailbox.messages AS m WHERE m.source = p_source AND m.backfill_state = 'owed'), 0)::double precision,
           (SELECT pg_catalog.count(*)::integer FROM mailbox.messages AS m WHERE m.source = p_source AND m.backfill_state = 'abandoned'),
           (SELECT pg_catalog.count(*)::integer FROM mailbox.messages AS m WHERE m.source = p_source AND m.state = 'dead')
      FROM (SELECT pg_catalog.count(*) AS n, pg_catalog.min(m.enqueued_at) AS oldest
              FROM mailbox.messages AS m WHERE m.source = p_source AND m.state IN ('pending', 'failed')) AS u
     CROSS JOIN (SELECT pg_catalog.sum(h.last_id - h.first_id + 1) FILTER (WHERE h.released_at IS NULL) AS open_ids,
                        pg_catalog.sum(h.last_id - h.first_id + 1) FILTER (WHERE h.released_at IS NOT NULL) AS released_ids
                   FROM mailbox.holes AS h WHERE h.source = p_source) AS hs
      LEFT JOIN LATERAL (SELECT m.msg_id, m.state, m.lease_expires_at
                           FROM mailbox.messages AS m
                          WHERE m.source = p_source AND m.state IN ('pending', 'failed') AND m.msg_id <= v_src.watermark
                          ORDER BY m.msg_id LIMIT 1) AS hd ON true;
END
$fn$;
COMMENT ON FUNCTION mailbox.pipeline_status(text) IS
    'One source''s pipeline status: watermark, lag (unfinished ids, seconds), holes, late rows, head and its state, oldest unmarked terminal age, abandoned backfills, dead letters. SPEC R-MX-12.';
REVOKE ALL ON FUNCTION mailbox.pipeline_status(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.pipeline_status(text) TO outbox_mailbox, outbox_auditor;


-- Grants (SPEC R-SEC-1): outbox_mailbox acts only through the functions; the auditor reads.
GRANT USAGE ON SCHEMA mailbox TO outbox_mailbox, outbox_registrar, outbox_auditor;
GRANT SELECT ON mailbox.sources, mailbox.pump_holders, mailbox.messages, mailbox.holes,
                mailbox.backfill_resolutions, mailbox.ref_effects, mailbox.ref_key_sequences
    TO outbox_auditor;

RESET ROLE;
