-- Retention, archive and legacy bootstrap (SPEC §9 R-RT-1..4, §3.3 R-BS-1..4, §13; issue 13).
--   * role outbox_retention (EXECUTE on the retention functions only);
--   * immutable archive tables (outbox.archived_*), one immutable audit row per archive run
--     (outbox.archive_runs, skips in outbox.archive_run_skips), legal holds (outbox.legal_holds);
--   * outbox.archive_events / verify_archive_run / set_legal_hold / release_legal_hold, the
--     completeness hook outbox.archive_integrity_problems and the view outbox.event_source;
--   * the hot tables' DELETE guard moves from each table's row trigger to one statement-level
--     trigger per table that lets through only rows archive_events copied in the same
--     transaction (OB202 for everyone else); UPDATE and TRUNCATE guards are unchanged;
--   * append_events refuses an archived event id (OB105; re-included: docs/migrations.md rule 2);
--   * bootstrap of legacy events: outbox.bootstrap_legacy_events with its items and evidence
--     (outbox.bootstrap_items, outbox.bootstrap_runs, view outbox.bootstrap_quarantine).
-- Applied to a running database: new tables and functions; the trigger swap and the BRIN index
-- take short locks on the hot tables (no rewrite, no backfill).

-- Roles are cluster-wide and need CREATEROLE: created before switching to the owner.
-- outbox_retention runs the audited archive procedure and sets/releases legal holds: EXECUTE on
-- those functions only (granted in each function file) and USAGE on schema outbox.
-- One NOLOGIN group role whose name is the template argument (a migration includes this file with
-- the role name as the template data; SPEC R-SEC-1). Roles are cluster-wide: created idempotently, tolerant of a parallel template
-- build creating the same role at the same moment (duplicate_object), as roles/create_roles.sql
-- does for the first six roles. Operators grant it to login users.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_retention') THEN
        BEGIN
            CREATE ROLE outbox_retention NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;


SET LOCAL ROLE outbox_owner;

GRANT USAGE ON SCHEMA outbox TO outbox_retention;

-- R-RT-1: age of an event for retention is its created_at. BRIN: almost free on the append hot
-- path (created_at grows with insertion order), enough for the archive's "older than" scan.
CREATE INDEX outbox_events_created_brin ON outbox.outbox_events USING brin (created_at);

-- R-RT-3: one immutable audit row per archive run, written last (after the moves).
CREATE TABLE outbox.archive_runs (
    run_id                        uuid PRIMARY KEY,
    run_by                        text NOT NULL,
    started_at                    timestamptz NOT NULL,
    finished_at                   timestamptz NOT NULL,
    older_than                    interval NOT NULL,
    max_rows                      integer NOT NULL,
    cutoff                        timestamptz NOT NULL,
    archived                      integer NOT NULL CHECK (archived >= 0),
    skipped                       integer NOT NULL CHECK (skipped >= 0),
    skipped_open_delivery         integer NOT NULL,
    skipped_unresolved_quarantine integer NOT NULL,
    skipped_legal_hold            integer NOT NULL,
    skipped_digest_mismatch       integer NOT NULL,
    deliveries                    integer NOT NULL,
    attempt_starts                integer NOT NULL,
    attempt_finishes              integer NOT NULL,
    quarantine_rows               integer NOT NULL,
    oldest_created_at             timestamptz,
    newest_created_at             timestamptz,
    archived_set_sha256           text NOT NULL CHECK (archived_set_sha256 ~ '^[0-9a-f]{64}$'),
    content_sha256                text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$')
);
COMMENT ON TABLE outbox.archive_runs IS
    'One immutable audit row per outbox.archive_events run: session user, parameters, counts, the set digest of the archived (event_id, digest) pairs and a content digest (SPEC R-RT-3).';

-- Skipped events of a run, with the reason (at most max_rows per run; exact counts in the run row).
CREATE TABLE outbox.archive_run_skips (
    run_id   uuid NOT NULL,
    event_id uuid NOT NULL,
    reason   text NOT NULL CHECK (reason IN ('open_delivery', 'unresolved_quarantine', 'legal_hold', 'digest_mismatch')),
    detail   text,
    PRIMARY KEY (run_id, event_id)
);

-- R-RT-1: the archived events keep every column of the hot row (same names), the canonical
-- envelope text and the publication time. The run row is written last in the same
-- transaction: the foreign key is checked at COMMIT.
CREATE TABLE outbox.archived_events (
    event_id                                         uuid PRIMARY KEY,
    run_id                                           uuid NOT NULL REFERENCES outbox.archive_runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    event_type                                       text NOT NULL,
    schema_version                                   text NOT NULL,
    delivery_set_version                             integer NOT NULL,
    delivery_set_definition_schema_version           integer NOT NULL,
    delivery_set_definition_digest_algorithm_version text NOT NULL,
    delivery_set_definition_digest                   text NOT NULL,
    aggregate_id                                     text NOT NULL,
    aggregate_revision                               bigint NOT NULL,
    tenant_kind                                      text NOT NULL,
    tenant_id                                        text NOT NULL,
    workspace_id                                     text NOT NULL,
    project_id                                       text,
    correlation_id                                   text,
    causation_id                                     text,
    operation_id                                     text,
    event_payload                                    jsonb NOT NULL,
    event_envelope_digest_algorithm_version          text NOT NULL,
    event_envelope_sha256                            text NOT NULL,
    occurred_at                                      timestamptz NOT NULL,
    created_at                                       timestamptz NOT NULL,
    event_envelope_canonical                         text NOT NULL,
    published_at                                     timestamptz,
    archived_at                                      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (delivery_set_version, delivery_set_definition_schema_version,
                 delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest)
        REFERENCES outbox.delivery_set_versions
);
CREATE INDEX archived_events_run ON outbox.archived_events (run_id);
COMMENT ON TABLE outbox.archived_events IS
    'Immutable archive of events moved out of outbox.outbox_events by outbox.archive_events; an archived id can never be appended again (SPEC R-RT-1).';

-- The children are kept as complete row images (jsonb of the hot row) with their keys, so the
-- archive does not depend on the hot tables' keys or on columns added to them later (several
-- quarantine rows per delivery are kept as they are: their own archive key).
CREATE TABLE outbox.archived_deliveries (
    destination text NOT NULL,
    event_id    uuid NOT NULL,
    run_id      uuid NOT NULL,
    status      text NOT NULL,
    row_image   jsonb NOT NULL,
    PRIMARY KEY (destination, event_id)
);
CREATE INDEX archived_deliveries_run ON outbox.archived_deliveries (run_id);
CREATE INDEX archived_deliveries_event ON outbox.archived_deliveries (event_id);
CREATE TABLE outbox.archived_attempt_starts (
    attempt_id  uuid PRIMARY KEY,
    run_id      uuid NOT NULL,
    destination text NOT NULL,
    event_id    uuid NOT NULL,
    row_image   jsonb NOT NULL
);
CREATE INDEX archived_attempt_starts_run ON outbox.archived_attempt_starts (run_id);
CREATE TABLE outbox.archived_attempt_finishes (
    attempt_id uuid PRIMARY KEY,
    run_id     uuid NOT NULL,
    event_id   uuid NOT NULL,
    row_image  jsonb NOT NULL
);
CREATE INDEX archived_attempt_finishes_run ON outbox.archived_attempt_finishes (run_id);
CREATE TABLE outbox.archived_quarantine (
    archive_row_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id         uuid NOT NULL,
    destination    text NOT NULL,
    event_id       uuid NOT NULL,
    row_image      jsonb NOT NULL
);
CREATE INDEX archived_quarantine_run ON outbox.archived_quarantine (run_id);
CREATE INDEX archived_quarantine_event ON outbox.archived_quarantine (event_id);

-- R-RT-1, R-RT-4: legal holds; a row is released once and never deleted (its own audit).
CREATE TABLE outbox.legal_holds (
    hold_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    uuid NOT NULL,
    reason      text NOT NULL CHECK (reason <> '' AND length(reason) <= 500),
    set_by      text NOT NULL,
    set_at      timestamptz NOT NULL DEFAULT now(),
    released_by text,
    released_at timestamptz,
    CHECK ((released_at IS NULL) = (released_by IS NULL))
);
CREATE UNIQUE INDEX legal_holds_active ON outbox.legal_holds (event_id) WHERE released_at IS NULL;
COMMENT ON TABLE outbox.legal_holds IS
    'Legal holds (SPEC R-RT-1): an event with an active hold (released_at IS NULL) is never archived. Set/released by outbox_retention; rows are never deleted.';

-- R-BS-2..4: bootstrap items (one per legacy row key, never changed: resumable, idempotent) and
-- one immutable evidence row per run.
CREATE TABLE outbox.bootstrap_runs (
    run_id                    uuid PRIMARY KEY,
    source                    text NOT NULL,
    delivery_set_version      integer NOT NULL,
    definition_schema_version integer NOT NULL,
    digest_algorithm_version  text NOT NULL,
    definition_digest         text NOT NULL,
    max_rows                  integer NOT NULL,
    run_by                    text NOT NULL,
    started_at                timestamptz NOT NULL,
    finished_at               timestamptz NOT NULL,
    imported                  integer NOT NULL,
    already_present           integer NOT NULL,
    quarantined               integer NOT NULL,
    quarantine_reasons        jsonb NOT NULL,
    present_before            integer NOT NULL,
    rows_left                 integer NOT NULL,
    evidence_sha256           text NOT NULL CHECK (evidence_sha256 ~ '^[0-9a-f]{64}$'),
    FOREIGN KEY (delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest)
        REFERENCES outbox.delivery_set_versions
);
COMMENT ON TABLE outbox.bootstrap_runs IS
    'One immutable evidence row per outbox.bootstrap_legacy_events run: counts per classification and reason, rows left, evidence set digest (SPEC R-BS-2, R-BS-4).';
CREATE TABLE outbox.bootstrap_items (
    source                text NOT NULL,
    item_key              text NOT NULL,
    run_id                uuid NOT NULL REFERENCES outbox.bootstrap_runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    event_id              uuid,
    classification        text NOT NULL CHECK (classification IN ('imported', 'already_present', 'quarantined')),
    reason                text CHECK (reason IN ('unsupported_schema', 'corrupt_envelope', 'corrupt_payload',
                                                 'not_canonicalizable', 'digest_conflict')),
    detail                text,
    event_envelope_sha256 text,
    delivery_set_version  integer NOT NULL,
    legacy_row            jsonb,
    recorded_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, item_key),
    CHECK ((classification = 'quarantined') = (reason IS NOT NULL)),
    CHECK ((classification = 'quarantined') = (event_envelope_sha256 IS NULL)),
    CHECK ((classification = 'quarantined') = (legacy_row IS NOT NULL))
);
CREATE INDEX bootstrap_items_run ON outbox.bootstrap_items (run_id);

-- The hot tables' DELETE guard (R-RT-1, R-RT-4): the row triggers keep UPDATE (and the truncate
-- triggers TRUNCATE); DELETE is guarded by tg_outbox_hot__retention_delete below.
DROP TRIGGER tg_outbox_events__immutable ON outbox.outbox_events;
CREATE TRIGGER tg_outbox_events__immutable BEFORE UPDATE ON outbox.outbox_events
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_events__immutable();
DROP TRIGGER tg_outbox_deliveries__no_delete ON outbox.outbox_deliveries;
DROP TRIGGER tg_outbox_delivery_attempt_starts__append_only ON outbox.outbox_delivery_attempt_starts;
CREATE TRIGGER tg_outbox_delivery_attempt_starts__append_only BEFORE UPDATE ON outbox.outbox_delivery_attempt_starts
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only();
DROP TRIGGER tg_outbox_delivery_attempt_finishes__append_only ON outbox.outbox_delivery_attempt_finishes;
CREATE TRIGGER tg_outbox_delivery_attempt_finishes__append_only BEFORE UPDATE ON outbox.outbox_delivery_attempt_finishes
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_finishes__append_only();
DROP TRIGGER tg_outbox_quarantine__append_only ON outbox.outbox_quarantine;
CREATE TRIGGER tg_outbox_quarantine__append_only BEFORE UPDATE ON outbox.outbox_quarantine
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();
DROP TRIGGER tg_outbox_publications__guarded ON outbox.outbox_publications;
CREATE TRIGGER tg_outbox_publications__guarded BEFORE UPDATE ON outbox.outbox_publications
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
-- Hot-table deletion guard (SPEC R-RT-1, R-RT-4, R-SEC-3): rows of the hot tables
-- (outbox_events, outbox_deliveries, outbox_delivery_attempt_starts,
-- outbox_delivery_attempt_finishes, outbox_quarantine, outbox_publications) leave only through
-- outbox.archive_events, in the transaction that copied them into the archive. Any other DELETE,
-- by any role (the owner included), raises OB202; TRUNCATE stays refused by each table's own
-- truncate trigger.
-- How: two statement-level triggers per table (one query per DELETE statement, not one call per
--   row): BEFORE DELETE refuses outside an archive run, AFTER DELETE checks the deleted rows
--   (transition table old_rows). A deletion is allowed
--   only when the transaction-local setting pgoutbox.archive_run names a run that has no
--   outbox.archive_runs row yet (the run row is written last, so a finished run can never
--   authorize a deletion again) AND every deleted row has its copy under that run: its event in
--   outbox.archived_events (attempt finishes: the attempt in outbox.archived_attempt_finishes).
--   A forged setting alone deletes nothing: only the owner can write the archive tables.
CREATE FUNCTION outbox.tg_outbox_hot__retention_delete() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_run     text := coalesce(pg_catalog.current_setting('pgoutbox.archive_run', true), '');
    v_key     text := CASE TG_TABLE_NAME WHEN 'outbox_delivery_attempt_finishes' THEN 'attempt_id' ELSE 'event_id' END;
    v_archive text := CASE TG_TABLE_NAME WHEN 'outbox_delivery_attempt_finishes' THEN 'archived_attempt_finishes' ELSE 'archived_events' END;
    v_bad     text;
BEGIN
    IF v_run !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
       OR EXISTS (SELECT 1 FROM outbox.archive_runs r WHERE r.run_id = v_run::uuid) THEN
        -- BEFORE: refused before any row (or foreign key) is looked at
        RAISE EXCEPTION 'immutability violation: DELETE on outbox.% is not allowed', TG_TABLE_NAME
            USING ERRCODE = 'OB202',
                  DETAIL = 'rows leave the hot tables only through outbox.archive_events, which copies them into the archive first';
    END IF;
    IF TG_WHEN = 'AFTER' THEN
        EXECUTE pg_catalog.format(
            'SELECT o.%1$I::text FROM old_rows o WHERE NOT EXISTS (SELECT 1 FROM outbox.%2$I a WHERE a.%1$I = o.%1$I AND a.run_id = $1) LIMIT 1',
            v_key, v_archive) INTO v_bad USING v_run::uuid;
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'immutability violation: DELETE on outbox.% is not allowed', TG_TABLE_NAME
                USING ERRCODE = 'OB202',
                      DETAIL = pg_catalog.format('%s %s was not copied into the archive by this run', v_key, v_bad);
        END IF;
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION outbox.tg_outbox_hot__retention_delete() IS
    'Trigger: a DELETE on a hot table raises OB202 unless outbox.archive_events copied every deleted row into the archive in the same transaction (SPEC R-RT-1, R-RT-4).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_hot__retention_delete() FROM PUBLIC;

-- Per table: BEFORE DELETE (statement) refuses outside an archive run; AFTER DELETE (statement,
-- over the deleted rows) checks that each one was copied under the run.
DO $triggers$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['outbox_events', 'outbox_deliveries', 'outbox_delivery_attempt_starts',
                                   'outbox_delivery_attempt_finishes', 'outbox_quarantine', 'outbox_publications']
    LOOP
        EXECUTE pg_catalog.format(
            'CREATE TRIGGER %I BEFORE DELETE ON outbox.%I FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete()',
            'tg_' || v_table || '__retention_delete', v_table);
        EXECUTE pg_catalog.format(
            'CREATE TRIGGER %I AFTER DELETE ON outbox.%I REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_hot__retention_delete()',
            'tg_' || v_table || '__retention_copied', v_table);
    END LOOP;
END
$triggers$;

-- Archive immutability (SPEC R-RT-1, R-RT-3, R-RT-4, R-BS-4): the archive tables, the archive run
-- audit rows and their skip reports, and the bootstrap evidence are written once and never
-- changed: UPDATE, DELETE and TRUNCATE raise OB202 for every role, the owner included.
CREATE FUNCTION outbox.tg_outbox_archive__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'immutability violation: % on outbox.% is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'OB202', DETAIL = 'archive and evidence rows are written once and never changed or deleted';
END
$fn$;
COMMENT ON FUNCTION outbox.tg_outbox_archive__immutable() IS
    'Trigger: archive, archive-run and bootstrap evidence tables are append-only; UPDATE/DELETE/TRUNCATE raise OB202 (SPEC R-RT-3, R-RT-4).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_archive__immutable() FROM PUBLIC;

-- Statement-level: refused before any row is touched, also when no row matches.
DO $triggers$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['archived_events', 'archived_deliveries', 'archived_attempt_starts',
                                   'archived_attempt_finishes', 'archived_quarantine', 'archive_runs',
                                   'archive_run_skips', 'bootstrap_runs', 'bootstrap_items']
    LOOP
        EXECUTE pg_catalog.format(
            'CREATE TRIGGER %I BEFORE UPDATE OR DELETE OR TRUNCATE ON outbox.%I FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable()',
            'tg_' || v_table || '__immutable', v_table);
    END LOOP;
END
$triggers$;

-- Legal holds (SPEC R-RT-1, R-RT-4): a hold row is written by outbox.set_legal_hold and changes
-- once, when outbox.release_legal_hold sets released_at/released_by; nothing else about it ever
-- changes, it is never deleted or truncated (OB202, every role): the holds are their own audit.
CREATE FUNCTION outbox.tg_outbox_legal_holds__release_only() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_LEVEL = 'ROW' AND TG_OP = 'UPDATE' AND OLD.released_at IS NULL AND NEW.released_at IS NOT NULL AND NEW.released_by IS NOT NULL
       AND (NEW.hold_id, NEW.event_id, NEW.reason, NEW.set_by, NEW.set_at)
           IS NOT DISTINCT FROM (OLD.hold_id, OLD.event_id, OLD.reason, OLD.set_by, OLD.set_at) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.legal_holds is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'a legal hold is only ever released once (outbox.release_legal_hold)';
END
$fn$;
COMMENT ON FUNCTION outbox.tg_outbox_legal_holds__release_only() IS
    'Trigger: outbox.legal_holds rows change only once, when released; DELETE/TRUNCATE raise OB202 (SPEC R-RT-1).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_legal_holds__release_only() FROM PUBLIC;

CREATE TRIGGER tg_outbox_legal_holds__release_only BEFORE UPDATE ON outbox.legal_holds
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_legal_holds__release_only();
CREATE TRIGGER tg_outbox_legal_holds__no_delete BEFORE DELETE OR TRUNCATE ON outbox.legal_holds
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_legal_holds__release_only();


-- Private helpers (granted to nobody).
-- outbox._archive_digest_problem(e outbox.outbox_events) RETURNS text
-- Purpose: the digest re-verification of SPEC R-RT-1 before an event is archived: NULL when the
--   database's own canonicalizer reproduces the stored jcs-sha256-v1 digest of the event's
--   stored columns, else a short problem (never document content). Never raises.
-- How (cheap where the append already stored the verified canonical text, D-2): the stored
--   canonical text is exactly an RFC 8785 canonical text (outbox._jcs_text_problem), its
--   sha256 is the stored digest, and it parses to the envelope rebuilt from the stored columns
--   (outbox._event_envelope; a canonical text is unique for its JSON value, so equal values
--   mean the canonicalizer would print exactly these bytes). A row without stored canonical
--   text (written outside append) is canonicalized in full (outbox.jcs_canonicalize).
-- Caller: outbox.archive_events (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._archive_digest_problem(e outbox.outbox_events) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_canon   text := e.event_envelope_canonical;
    v_problem text;
BEGIN
    IF e.event_envelope_digest_algorithm_version IS DISTINCT FROM 'jcs-sha256-v1' THEN
        RETURN 'unknown_digest_algorithm';
    END IF;
    IF v_canon IS NULL THEN
        BEGIN
            v_canon := outbox.jcs_canonicalize(outbox._event_envelope(e)::json);
        EXCEPTION WHEN SQLSTATE 'OB201' THEN
            RETURN 'not_canonicalizable: ' || SQLERRM;
        END;
    ELSE
        v_problem := outbox._jcs_text_problem(v_canon);
        IF v_problem IS NOT NULL THEN
            RETURN 'canonical_text_not_canonical: ' || v_problem;
        END IF;
        IF v_canon::jsonb <> outbox._event_envelope(e) THEN
            RETURN 'canonical_text_mismatch: the stored canonical envelope is not the envelope of the stored columns';
        END IF;
    END IF;
    IF outbox._sha256_hex(v_canon) <> e.event_envelope_sha256 THEN
        RETURN pg_catalog.format('digest_mismatch: stored %s, recomputed %s', e.event_envelope_sha256, outbox._sha256_hex(v_canon));
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION outbox._archive_digest_problem(outbox.outbox_events) IS
    'Private: NULL when the database canonicalizer reproduces the stored digest of an event, else the problem (SPEC R-RT-1).';
REVOKE ALL ON FUNCTION outbox._archive_digest_problem(outbox.outbox_events) FROM PUBLIC;

-- outbox._archive_run_digests(p_run_id uuid)
--   RETURNS TABLE (events int, deliveries int, attempt_starts int, attempt_finishes int,
--                  quarantine_rows int, archived_set_sha256 text, content_sha256 text)
-- Purpose: what an archive run left in the archive, recomputed from the archive tables alone
--   (SPEC R-RT-3): the row counts per table, the set digest of the archived (event_id, digest)
--   pairs and a digest over the complete content of every archived row of the run.
--   archived_set_sha256 = lower-case hex sha256 of the UTF-8 text made of one line
--     "<event_id> <event_envelope_sha256>\n" per archived event, in event_id order (the empty
--     text for an empty set).
--   content_sha256 = sha256 over five sections (events, deliveries, attempt starts, attempt
--     finishes, quarantine rows), each the label and the rows' jsonb text one per line in key
--     order (quarantine rows: in order of their text).
--   outbox.archive_events writes both into the run row; outbox.verify_archive_run recomputes
--   and compares them, so a missing, added or altered archive row fails verification.
-- Caller: archive_events, verify_archive_run (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._archive_run_digests(p_run_id uuid)
RETURNS TABLE (events integer, deliveries integer, attempt_starts integer, attempt_finishes integer,
               quarantine_rows integer, archived_set_sha256 text, content_sha256 text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT (SELECT pg_catalog.count(*) FROM outbox.archived_events a WHERE a.run_id = p_run_id)::integer,
           (SELECT pg_catalog.count(*) FROM outbox.archived_deliveries a WHERE a.run_id = p_run_id)::integer,
           (SELECT pg_catalog.count(*) FROM outbox.archived_attempt_starts a WHERE a.run_id = p_run_id)::integer,
           (SELECT pg_catalog.count(*) FROM outbox.archived_attempt_finishes a WHERE a.run_id = p_run_id)::integer,
           (SELECT pg_catalog.count(*) FROM outbox.archived_quarantine a WHERE a.run_id = p_run_id)::integer,
           outbox._sha256_hex(coalesce(
               (SELECT pg_catalog.string_agg(a.event_id::text || ' ' || a.event_envelope_sha256 || E'\n', '' ORDER BY a.event_id)
                  FROM outbox.archived_events a WHERE a.run_id = p_run_id), '')),
           outbox._sha256_hex(
               'events' || E'\n' || coalesce(
                   (SELECT pg_catalog.string_agg(pg_catalog.to_jsonb(a)::text, E'\n' ORDER BY a.event_id)
                      FROM outbox.archived_events a WHERE a.run_id = p_run_id), '')
               || E'\ndeliveries\n' || coalesce(
                   (SELECT pg_catalog.string_agg(pg_catalog.to_jsonb(a)::text, E'\n' ORDER BY a.destination, a.event_id)
                      FROM outbox.archived_deliveries a WHERE a.run_id = p_run_id), '')
               || E'\nattempt_starts\n' || coalesce(
                   (SELECT pg_catalog.string_agg(pg_catalog.to_jsonb(a)::text, E'\n' ORDER BY a.attempt_id)
                      FROM outbox.archived_attempt_starts a WHERE a.run_id = p_run_id), '')
               || E'\nattempt_finishes\n' || coalesce(
                   (SELECT pg_catalog.string_agg(pg_catalog.to_jsonb(a)::text, E'\n' ORDER BY a.attempt_id)
                      FROM outbox.archived_attempt_finishes a WHERE a.run_id = p_run_id), '')
               || E'\nquarantine\n' || coalesce(
                   (SELECT pg_catalog.string_agg(x.t, E'\n' ORDER BY x.t)
                      FROM (SELECT (pg_catalog.to_jsonb(a) - 'archive_row_id')::text AS t
                              FROM outbox.archived_quarantine a WHERE a.run_id = p_run_id) x), ''))
$fn$;
COMMENT ON FUNCTION outbox._archive_run_digests(uuid) IS
    'Private: row counts, (event_id, digest) set digest and content digest of one archive run, from the archive tables (SPEC R-RT-3).';
REVOKE ALL ON FUNCTION outbox._archive_run_digests(uuid) FROM PUBLIC;

-- outbox._bootstrap_envelope(legacy columns as text/timestamptz..., p_max_bytes bigint)
--   RETURNS record (reason, detail, the columns of outbox._append_validate)
-- Purpose: one legacy row of a bootstrap source (SPEC R-BS-2, R-BS-3, R-BS-4) turned into an
--   EventEnvelope@1 and checked with exactly the append rules (outbox._append_validate, slow
--   path: the database canonicalizes and computes the jcs-sha256-v1 digest). Never raises for a
--   bad row: reason is NULL for a valid envelope, else its bootstrap quarantine class
--     corrupt_envelope     eventId or occurredAt missing, a field of the wrong type/literal,
--                          a refinement (R-AP-7) violated (OB105)
--     corrupt_payload      payload missing, not JSON, not an object, or not storable (\u0000)
--     not_canonicalizable  the document cannot be canonicalized (OB201: duplicate key,
--                          non-integer or unsafe number, nesting)
--   with a short detail (never document content). The payload is taken as its JSON text, so
--   duplicate keys in a json column are seen.
-- Caller: outbox.bootstrap_legacy_events (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._bootstrap_envelope(
    p_event_id text, p_event_type text, p_event_schema_version text, p_aggregate_id text,
    p_aggregate_revision text, p_tenant_kind text, p_tenant_id text, p_workspace_id text,
    p_project_id text, p_correlation_id text, p_causation_id text, p_operation_id text,
    p_payload text, p_occurred_at timestamptz, p_max_bytes bigint,
    OUT reason text, OUT detail text,
    OUT event_id uuid, OUT event_type text, OUT schema_version text, OUT aggregate_id text,
    OUT aggregate_revision bigint, OUT tenant_kind text, OUT tenant_id text, OUT workspace_id text,
    OUT project_id text, OUT correlation_id text, OUT causation_id text, OUT operation_id text,
    OUT event_payload jsonb, OUT occurred_at timestamptz, OUT event_envelope_sha256 text,
    OUT event_envelope_canonical text
) RETURNS record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_text text;
    v_json json;
    v_rec  record;
BEGIN
    IF p_event_id IS NULL OR p_occurred_at IS NULL THEN
        reason := 'corrupt_envelope';
        detail := 'event_id and occurred_at are required';
        RETURN;
    END IF;
    IF p_payload IS NULL THEN
        reason := 'corrupt_payload';
        detail := 'payload is NULL';
        RETURN;
    END IF;
    BEGIN
        v_json := p_payload::json;
    EXCEPTION WHEN invalid_text_representation OR untranslatable_character THEN
        reason := 'corrupt_payload';
        detail := 'payload is not JSON';
        RETURN;
    END;
    IF pg_catalog.json_typeof(v_json) <> 'object' THEN
        reason := 'corrupt_payload';
        detail := 'payload is not a JSON object';
        RETURN;
    END IF;
    v_text := '{"eventId":' || pg_catalog.to_json(p_event_id)::text
        || ',"eventType":' || coalesce(pg_catalog.to_json(p_event_type)::text, 'null')
        || ',"eventSchemaVersion":' || coalesce(pg_catalog.to_json(p_event_schema_version)::text, 'null')
        || ',"aggregateId":' || coalesce(pg_catalog.to_json(p_aggregate_id)::text, 'null')
        || ',"aggregateRevision":' || CASE WHEN p_aggregate_revision ~ '^-?[0-9]{1,20}$' THEN p_aggregate_revision
                                           ELSE coalesce(pg_catalog.to_json(p_aggregate_revision)::text, 'null') END
        || ',"tenant":' || pg_catalog.json_strip_nulls(pg_catalog.json_build_object(
               'tenantKind', p_tenant_kind, 'tenantId', p_tenant_id, 'workspaceId', p_workspace_id,
               'projectId', p_project_id))::text
        || CASE WHEN p_correlation_id IS NULL THEN '' ELSE ',"correlationId":' || pg_catalog.to_json(p_correlation_id)::text END
        || CASE WHEN p_causation_id IS NULL THEN '' ELSE ',"causationId":' || pg_catalog.to_json(p_causation_id)::text END
        || CASE WHEN p_operation_id IS NULL THEN '' ELSE ',"operationId":' || pg_catalog.to_json(p_operation_id)::text END
        || ',"occurredAt":"' || pg_catalog.to_char(p_occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '"'
        || ',"payload":' || p_payload || '}';
    BEGIN
        SELECT * INTO v_rec FROM outbox._append_validate(v_text::json, NULL, NULL, p_max_bytes, '');
    EXCEPTION
        WHEN SQLSTATE 'OB105' THEN
            reason := 'corrupt_envelope';
            GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
            detail := pg_catalog.left(coalesce(nullif(detail, ''), SQLERRM), 200);
            RETURN;
        WHEN SQLSTATE 'OB201' THEN
            reason := 'not_canonicalizable';
            GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
            detail := pg_catalog.left(SQLERRM || coalesce(': ' || nullif(detail, ''), ''), 200);
            RETURN;
        WHEN invalid_text_representation OR untranslatable_character OR character_not_in_repertoire THEN
            reason := 'corrupt_payload';
            detail := 'the envelope cannot be stored (invalid text or \u0000)';
            RETURN;
    END;
    event_id := v_rec.event_id; event_type := v_rec.event_type; schema_version := v_rec.schema_version;
    aggregate_id := v_rec.aggregate_id; aggregate_revision := v_rec.aggregate_revision;
    tenant_kind := v_rec.tenant_kind; tenant_id := v_rec.tenant_id; workspace_id := v_rec.workspace_id;
    project_id := v_rec.project_id; correlation_id := v_rec.correlation_id; causation_id := v_rec.causation_id;
    operation_id := v_rec.operation_id; event_payload := v_rec.event_payload; occurred_at := v_rec.occurred_at;
    event_envelope_sha256 := v_rec.event_envelope_sha256; event_envelope_canonical := v_rec.event_envelope_canonical;
END
$fn$;
COMMENT ON FUNCTION outbox._bootstrap_envelope(text, text, text, text, text, text, text, text, text, text, text, text, text, timestamptz, bigint) IS
    'Private: one legacy row as a validated EventEnvelope@1 with its database-computed digest, or its bootstrap quarantine class (SPEC R-BS-2, R-BS-3).';
REVOKE ALL ON FUNCTION outbox._bootstrap_envelope(text, text, text, text, text, text, text, text, text, text, text, text, text, timestamptz, bigint) FROM PUBLIC;


-- Public API (SPEC §13), grants in each file.
-- outbox.archive_events(older_than interval, max_rows int DEFAULT 1000)
--   RETURNS TABLE (run_id uuid, archived int, skipped int, archived_set_sha256 text)
--   (public, SPEC R-RT-1..4)
-- Purpose: the audited retention procedure: moves up to max_rows eligible events, oldest first,
--   with their deliveries, attempts, quarantine rows and publication time, from the hot tables
--   into the immutable archive tables in this one transaction, and writes the run's audit row.
--   Eligible: older than now() - older_than, every delivery terminal, no unresolved quarantine,
--   no active legal hold, stored digest re-verified. Inbox receipts are never touched (R-RT-2).
-- Locking: row locks (SKIP LOCKED) on the batch's events and deliveries; others proceed.
-- SQLSTATEs: 22023 older_than NULL or negative, max_rows outside 1..100000.
-- Design notes (steps, skip reasons, time): docs/retention.md#outboxarchive_events
-- Caller: outbox_retention.
CREATE FUNCTION outbox.archive_events(p_older_than interval, p_max_rows integer DEFAULT 1000)
RETURNS TABLE (run_id uuid, archived integer, skipped integer, archived_set_sha256 text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_run      uuid := pg_catalog.gen_random_uuid();
    v_cutoff   timestamptz;
    v_ids      uuid[];
    v_ok       uuid[];
    v_open     integer := 0;
    v_unres    integer := 0;
    v_held     integer := 0;
    v_mismatch integer := 0;
    v_dig      record;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '0' THEN
        RAISE EXCEPTION 'archive_events: older_than must be a non-negative interval'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'archive_events: max_rows must be between 1 and 100000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cutoff := pg_catalog.now() - p_older_than;

    -- 1. The batch: old, every delivery terminal, no unresolved quarantine, no active hold.
    SELECT pg_catalog.array_agg(b.event_id ORDER BY b.created_at, b.event_id) INTO v_ids
      FROM (SELECT e.event_id, e.created_at
              FROM outbox.outbox_events e
             WHERE e.created_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries d
                                WHERE d.event_id = e.event_id AND d.status NOT IN ('acknowledged', 'quarantined'))
               AND NOT EXISTS (SELECT 1 FROM outbox.outbox_quarantine q
                                WHERE q.event_id = e.event_id AND q.acknowledged_at IS NULL)
               AND NOT EXISTS (SELECT 1 FROM outbox.legal_holds h
                                WHERE h.event_id = e.event_id AND h.released_at IS NULL)
             ORDER BY e.created_at, e.event_id
             LIMIT p_max_rows
               FOR UPDATE OF e SKIP LOCKED) b;
    v_ids := coalesce(v_ids, '{}');

    -- 2. Lock the batch's deliveries (a concurrent state change waits for this run), then
    -- 3. re-check in a fresh statement: what changed before the locks were granted drops out.
    PERFORM 1 FROM outbox.outbox_deliveries d WHERE d.event_id = ANY (v_ids)
      ORDER BY d.destination, d.event_id FOR UPDATE;
    SELECT coalesce(pg_catalog.array_agg(i.id ORDER BY i.id), '{}') INTO v_ids
      FROM pg_catalog.unnest(v_ids) AS i(id)
     WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries d
                        WHERE d.event_id = i.id AND d.status NOT IN ('acknowledged', 'quarantined'))
       AND NOT EXISTS (SELECT 1 FROM outbox.outbox_quarantine q WHERE q.event_id = i.id AND q.acknowledged_at IS NULL)
       AND NOT EXISTS (SELECT 1 FROM outbox.legal_holds h WHERE h.event_id = i.id AND h.released_at IS NULL);

    -- Old events that are not eligible, reported per reason (first reason wins). Driven by the
    -- small sets (open deliveries, unresolved quarantine, active holds), not by the event table.
    WITH blocked AS (
        SELECT d.event_id, 1 AS pri FROM outbox.outbox_deliveries d WHERE d.status NOT IN ('acknowledged', 'quarantined')
        UNION ALL
        SELECT q.event_id, 2 FROM outbox.outbox_quarantine q WHERE q.acknowledged_at IS NULL
        UNION ALL
        SELECT h.event_id, 3 FROM outbox.legal_holds h WHERE h.released_at IS NULL
    ), r AS MATERIALIZED (
        SELECT b.event_id, pg_catalog.min(b.pri) AS pri
          FROM blocked b
          JOIN outbox.outbox_events e ON e.event_id = b.event_id
         WHERE e.created_at < v_cutoff
         GROUP BY b.event_id
    ), reported AS (
        INSERT INTO outbox.archive_run_skips (run_id, event_id, reason, detail)
        SELECT v_run, r.event_id,
               CASE r.pri WHEN 1 THEN 'open_delivery' WHEN 2 THEN 'unresolved_quarantine' ELSE 'legal_hold' END, NULL
          FROM r ORDER BY r.event_id LIMIT p_max_rows
        RETURNING 1
    )
    SELECT pg_catalog.count(*) FILTER (WHERE r.pri = 1), pg_catalog.count(*) FILTER (WHERE r.pri = 2),
           pg_catalog.count(*) FILTER (WHERE r.pri = 3)
      INTO v_open, v_unres, v_held
      FROM r; -- (reported, a data-modifying WITH, always runs to completion)

    -- 4. Digest re-verification with the database's own canonicalizer: mismatches are skipped.
    WITH chk AS MATERIALIZED (
        SELECT e.event_id, outbox._archive_digest_problem(e) AS problem
          FROM outbox.outbox_events e WHERE e.event_id = ANY (v_ids)
    ), reported AS (
        INSERT INTO outbox.archive_run_skips (run_id, event_id, reason, detail)
        SELECT v_run, c.event_id, 'digest_mismatch', c.problem FROM chk c WHERE c.problem IS NOT NULL
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT coalesce(pg_catalog.array_agg(c.event_id ORDER BY c.event_id) FILTER (WHERE c.problem IS NULL), '{}'),
           pg_catalog.count(*) FILTER (WHERE c.problem IS NOT NULL)
      INTO v_ok, v_mismatch
      FROM chk c;

    -- 5. Copy into the archive (complete rows; the child tables as row images, so columns added
    --    to a hot table later are archived as well).
    INSERT INTO outbox.archived_events
        (event_id, run_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
         delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest, aggregate_id,
         aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id, correlation_id, causation_id,
         operation_id, event_payload, event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at,
         created_at, event_envelope_canonical, published_at)
    SELECT e.event_id, v_run, e.event_type, e.schema_version, e.delivery_set_version, e.delivery_set_definition_schema_version,
           e.delivery_set_definition_digest_algorithm_version, e.delivery_set_definition_digest, e.aggregate_id,
           e.aggregate_revision, e.tenant_kind, e.tenant_id, e.workspace_id, e.project_id, e.correlation_id, e.causation_id,
           e.operation_id, e.event_payload, e.event_envelope_digest_algorithm_version, e.event_envelope_sha256, e.occurred_at,
           e.created_at,
           coalesce(e.event_envelope_canonical, outbox.jcs_canonicalize(outbox._event_envelope(e)::json)),
           p.published_at
      FROM outbox.outbox_events e
      LEFT JOIN outbox.outbox_publications p ON p.event_id = e.event_id
     WHERE e.event_id = ANY (v_ok);
    INSERT INTO outbox.archived_deliveries (destination, event_id, run_id, status, row_image)
    SELECT d.destination, d.event_id, v_run, d.status, pg_catalog.to_jsonb(d)
      FROM outbox.outbox_deliveries d WHERE d.event_id = ANY (v_ok);
    INSERT INTO outbox.archived_attempt_starts (attempt_id, run_id, destination, event_id, row_image)
    SELECT s.attempt_id, v_run, s.destination, s.event_id, pg_catalog.to_jsonb(s)
      FROM outbox.outbox_delivery_attempt_starts s WHERE s.event_id = ANY (v_ok);
    INSERT INTO outbox.archived_attempt_finishes (attempt_id, run_id, event_id, row_image)
    SELECT f.attempt_id, v_run, s.event_id, pg_catalog.to_jsonb(f)
      FROM outbox.outbox_delivery_attempt_finishes f
      JOIN outbox.outbox_delivery_attempt_starts s ON s.attempt_id = f.attempt_id
     WHERE s.event_id = ANY (v_ok);
    INSERT INTO outbox.archived_quarantine (run_id, destination, event_id, row_image)
    SELECT v_run, q.destination, q.event_id, pg_catalog.to_jsonb(q)
      FROM outbox.outbox_quarantine q WHERE q.event_id = ANY (v_ok);

    -- 6. Remove from the hot tables (children first), authorized for this run only.
    PERFORM pg_catalog.set_config('pgoutbox.archive_run', v_run::text, true);
    DELETE FROM outbox.outbox_delivery_attempt_finishes f
     USING outbox.outbox_delivery_attempt_starts s
     WHERE s.attempt_id = f.attempt_id AND s.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_quarantine q WHERE q.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_delivery_attempt_starts s WHERE s.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_deliveries d WHERE d.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_publications p WHERE p.event_id = ANY (v_ok);
    DELETE FROM outbox.outbox_events e WHERE e.event_id = ANY (v_ok);
    PERFORM pg_catalog.set_config('pgoutbox.archive_run', '', true);

    -- 7. The run's immutable audit row, from what the archive now holds.
    SELECT * INTO v_dig FROM outbox._archive_run_digests(v_run);
    INSERT INTO outbox.archive_runs
        (run_id, run_by, started_at, finished_at, older_than, max_rows, cutoff, archived, skipped,
         skipped_open_delivery, skipped_unresolved_quarantine, skipped_legal_hold, skipped_digest_mismatch,
         deliveries, attempt_starts, attempt_finishes, quarantine_rows, oldest_created_at, newest_created_at,
         archived_set_sha256, content_sha256)
    SELECT v_run, session_user, pg_catalog.now(), pg_catalog.clock_timestamp(), p_older_than, p_max_rows,
           v_cutoff, v_dig.events, v_open + v_unres + v_held + v_mismatch,
           v_open, v_unres, v_held, v_mismatch,
           v_dig.deliveries, v_dig.attempt_starts, v_dig.attempt_finishes, v_dig.quarantine_rows,
           (SELECT pg_catalog.min(a.created_at) FROM outbox.archived_events a WHERE a.run_id = v_run),
           (SELECT pg_catalog.max(a.created_at) FROM outbox.archived_events a WHERE a.run_id = v_run),
           v_dig.archived_set_sha256, v_dig.content_sha256;

    RETURN QUERY SELECT v_run, v_dig.events, v_open + v_unres + v_held + v_mismatch, v_dig.archived_set_sha256;
END
$fn$;
COMMENT ON FUNCTION outbox.archive_events(interval, integer) IS
    'Retention: move up to max_rows old, terminal, unheld, digest-verified events with their deliveries, attempts and quarantine rows into the immutable archive; one audit row per run (SPEC R-RT-1..4). Caller: outbox_retention.';
REVOKE ALL ON FUNCTION outbox.archive_events(interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.archive_events(interval, integer) TO outbox_retention;

-- outbox.verify_archive_run(run_id uuid) RETURNS TABLE (run_id uuid, verified bool, problem text)
-- Purpose: restore-drill evidence for one archive run (SPEC R-RT-3): recomputes, from the archive
--   tables alone, the run's row counts, the set digest of its archived (event_id, digest) pairs
--   and the digest of the complete content of its archived rows (outbox._archive_run_digests),
--   compares them with the run's audit row, and re-verifies every archived event's digest with
--   the database's own canonicalizer on the envelope rebuilt from the archived columns. One row:
--   verified = true and problem NULL, or verified = false and the problems found, '; '-separated
--   (unknown_run, <table>_count_mismatch, archived_set_mismatch, content_mismatch,
--   event_digest_mismatch <event_id>: <problem>, at most 10 listed). A missing, added or altered
--   archive row therefore fails verification.
-- Locking: none (plain reads). SQLSTATEs: 22023 run_id NULL.
-- Caller: outbox_auditor, outbox_retention.
CREATE FUNCTION outbox.verify_archive_run(p_run_id uuid)
RETURNS TABLE (run_id uuid, verified boolean, problem text)
LANGUAGE plpgsql SECURITY DEFINER STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_run      outbox.archive_runs%ROWTYPE;
    v_dig      record;
    v_problems text[] := '{}';
BEGIN
    IF p_run_id IS NULL THEN
        RAISE EXCEPTION 'verify_archive_run: run_id is NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_run FROM outbox.archive_runs r WHERE r.run_id = p_run_id;
    IF NOT FOUND THEN
        RETURN QUERY SELECT p_run_id, false, 'unknown_run'::text;
        RETURN;
    END IF;
    SELECT * INTO v_dig FROM outbox._archive_run_digests(p_run_id);
    IF v_dig.events <> v_run.archived THEN
        v_problems := v_problems || pg_catalog.format('events_count_mismatch: run row %s, archive %s', v_run.archived, v_dig.events);
    END IF;
    IF v_dig.deliveries <> v_run.deliveries THEN
        v_problems := v_problems || pg_catalog.format('deliveries_count_mismatch: run row %s, archive %s', v_run.deliveries, v_dig.deliveries);
    END IF;
    IF v_dig.attempt_starts <> v_run.attempt_starts THEN
        v_problems := v_problems || pg_catalog.format('attempt_starts_count_mismatch: run row %s, archive %s', v_run.attempt_starts, v_dig.attempt_starts);
    END IF;
    IF v_dig.attempt_finishes <> v_run.attempt_finishes THEN
        v_problems := v_problems || pg_catalog.format('attempt_finishes_count_mismatch: run row %s, archive %s', v_run.attempt_finishes, v_dig.attempt_finishes);
    END IF;
    IF v_dig.quarantine_rows <> v_run.quarantine_rows THEN
        v_problems := v_problems || pg_catalog.format('quarantine_count_mismatch: run row %s, archive %s', v_run.quarantine_rows, v_dig.quarantine_rows);
    END IF;
    IF v_dig.archived_set_sha256 <> v_run.archived_set_sha256 THEN
        v_problems := v_problems || 'archived_set_mismatch: the (event_id, digest) set digest is not reproduced'::text;
    END IF;
    IF v_dig.content_sha256 <> v_run.content_sha256 THEN
        v_problems := v_problems || 'content_mismatch: the archived rows are not the rows the run wrote'::text;
    END IF;
    -- Every archived envelope re-verified with the canonicalizer, from the archived columns.
    v_problems := v_problems || ARRAY(
        SELECT pg_catalog.format('event_digest_mismatch %s: %s', x.event_id, x.problem)
          FROM (SELECT a.event_id,
                       outbox._archive_digest_problem(pg_catalog.jsonb_populate_record(NULL::outbox.outbox_events, pg_catalog.to_jsonb(a))) AS problem
                  FROM outbox.archived_events a WHERE a.run_id = p_run_id) x
         WHERE x.problem IS NOT NULL
         ORDER BY x.event_id LIMIT 10);
    RETURN QUERY SELECT p_run_id, pg_catalog.cardinality(v_problems) = 0,
                        CASE WHEN pg_catalog.cardinality(v_problems) = 0 THEN NULL
                             ELSE pg_catalog.array_to_string(v_problems, '; ') END;
END
$fn$;
COMMENT ON FUNCTION outbox.verify_archive_run(uuid) IS
    'Recompute an archive run''s counts, (event_id, digest) set digest, content digest and every archived envelope digest and compare with its audit row (SPEC R-RT-3). Caller: outbox_auditor, outbox_retention.';
REVOKE ALL ON FUNCTION outbox.verify_archive_run(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.verify_archive_run(uuid) TO outbox_auditor, outbox_retention;

-- outbox.archive_integrity_problems(created_from timestamptz DEFAULT NULL,
--                                   created_before timestamptz DEFAULT NULL)
--   RETURNS TABLE (run_id uuid, problem text)
-- Purpose: the completeness hook of SPEC R-RT-3 / §11: a completeness proof that covers events
--   created in [created_from, created_before) (NULL = unbounded) must call this function in its
--   snapshot and may claim complete_for_supported_scope only when it returns no row. It returns
--   one row per problem: every archive run whose archived events overlap the range and whose
--   verification fails (outbox.verify_archive_run), and every archived row whose run has no audit
--   row (orphan: its run row is missing). An empty result means the archived part of the range
--   is exactly what the runs recorded.
-- Cost: verifies every overlapping run (re-canonicalizes their envelopes): an auditor's call.
-- Locking: none. Caller: outbox_auditor, outbox_retention.
CREATE FUNCTION outbox.archive_integrity_problems(p_created_from timestamptz DEFAULT NULL,
                                                  p_created_before timestamptz DEFAULT NULL)
RETURNS TABLE (run_id uuid, problem text)
LANGUAGE sql SECURITY DEFINER STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT v.run_id, v.problem
      FROM outbox.archive_runs r
     CROSS JOIN LATERAL outbox.verify_archive_run(r.run_id) v
     WHERE r.archived > 0
       AND (p_created_from IS NULL OR r.newest_created_at >= p_created_from)
       AND (p_created_before IS NULL OR r.oldest_created_at < p_created_before)
       AND NOT v.verified
    UNION ALL
    SELECT o.run_id, pg_catalog.format('orphan: %s archived %s row(s) without an archive run row', o.tbl, o.n)
      FROM (SELECT a.run_id, 'events' AS tbl, pg_catalog.count(*) AS n FROM outbox.archived_events a
             WHERE (p_created_from IS NULL OR a.created_at >= p_created_from)
               AND (p_created_before IS NULL OR a.created_at < p_created_before)
             GROUP BY a.run_id
            UNION ALL
            SELECT a.run_id, 'deliveries', pg_catalog.count(*) FROM outbox.archived_deliveries a GROUP BY a.run_id
            UNION ALL
            SELECT a.run_id, 'attempt_starts', pg_catalog.count(*) FROM outbox.archived_attempt_starts a GROUP BY a.run_id
            UNION ALL
            SELECT a.run_id, 'attempt_finishes', pg_catalog.count(*) FROM outbox.archived_attempt_finishes a GROUP BY a.run_id
            UNION ALL
            SELECT a.run_id, 'quarantine', pg_catalog.count(*) FROM outbox.archived_quarantine a GROUP BY a.run_id) o
     WHERE NOT EXISTS (SELECT 1 FROM outbox.archive_runs r WHERE r.run_id = o.run_id)
     ORDER BY 1, 2
$fn$;
COMMENT ON FUNCTION outbox.archive_integrity_problems(timestamptz, timestamptz) IS
    'Completeness hook (SPEC R-RT-3, §11): archive runs overlapping the created_at range that fail verification, and orphaned archive rows; a proof may be complete only when this is empty. Caller: outbox_auditor, outbox_retention.';
REVOKE ALL ON FUNCTION outbox.archive_integrity_problems(timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.archive_integrity_problems(timestamptz, timestamptz) TO outbox_auditor, outbox_retention;

-- outbox.set_legal_hold(event_id uuid, reason text) RETURNS void
-- Purpose: place a legal hold on an event (SPEC R-RT-1, R-RT-4): outbox.archive_events never
--   archives an event with an active hold. The hold row (outbox.legal_holds: reason, session
--   user, time; released once by outbox.release_legal_hold, never deleted) is its own audit.
--   Idempotent: an event that already has an active hold keeps it (first reason stays).
--   An archived event may be held too (the archive is immutable anyway; the hold records it).
-- Locking: FOR KEY SHARE on the hot event row, so a hold and an archive run of the same event
--   serialize (the run skips an event being held; the hold waits for a run that took it).
-- SQLSTATEs: 22023 reason empty or longer than 500 characters; P0002 unknown event id.
-- Caller: outbox_retention.
CREATE FUNCTION outbox.set_legal_hold(p_event_id uuid, p_reason text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_reason IS NULL OR pg_catalog.btrim(p_reason) = '' OR pg_catalog.length(p_reason) > 500 THEN
        RAISE EXCEPTION 'set_legal_hold: reason must be a non-empty text of at most 500 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM outbox.outbox_events e WHERE e.event_id = p_event_id FOR KEY SHARE;
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM outbox.archived_events a WHERE a.event_id = p_event_id) THEN
        RAISE EXCEPTION 'set_legal_hold: unknown event'
            USING ERRCODE = 'no_data_found', DETAIL = pg_catalog.format('event %s is neither in the hot tables nor archived', p_event_id);
    END IF;
    INSERT INTO outbox.legal_holds (event_id, reason, set_by)
    VALUES (p_event_id, p_reason, session_user)
    ON CONFLICT (event_id) WHERE released_at IS NULL DO NOTHING;
END
$fn$;
COMMENT ON FUNCTION outbox.set_legal_hold(uuid, text) IS
    'Place an audited legal hold on an event; archive_events never archives a held event (SPEC R-RT-1). Caller: outbox_retention.';
REVOKE ALL ON FUNCTION outbox.set_legal_hold(uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.set_legal_hold(uuid, text) TO outbox_retention;

-- outbox.release_legal_hold(event_id uuid) RETURNS void
-- Purpose: release the active legal hold of an event (SPEC R-RT-1): the hold row gets
--   released_at = now() and released_by = session user, once (trigger
--   tg_outbox_legal_holds__release_only); the row stays as the audit of the hold.
-- Locking: the hold row (UPDATE).
-- SQLSTATEs: P0002 the event has no active hold.
-- Caller: outbox_retention.
CREATE FUNCTION outbox.release_legal_hold(p_event_id uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    UPDATE outbox.legal_holds h
       SET released_at = pg_catalog.now(), released_by = session_user
     WHERE h.event_id = p_event_id AND h.released_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release_legal_hold: no active legal hold'
            USING ERRCODE = 'no_data_found', DETAIL = pg_catalog.format('event %s has no active legal hold', p_event_id);
    END IF;
END
$fn$;
COMMENT ON FUNCTION outbox.release_legal_hold(uuid) IS
    'Release the active legal hold of an event; the hold row stays as its audit (SPEC R-RT-1). Caller: outbox_retention.';
REVOKE ALL ON FUNCTION outbox.release_legal_hold(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.release_legal_hold(uuid) TO outbox_retention;

-- outbox.bootstrap_legacy_events(source regclass, delivery_set_version int,
--     definition_schema_version int, digest_algorithm_version text, definition_digest text,
--     max_rows int DEFAULT 10000)
--   RETURNS TABLE (run_id uuid, imported int, quarantined int, already_present int, evidence_sha256 text)
--   (public, SPEC R-BS-1..4)
-- Purpose: adopt the events of an outbox that existed before the kernel: each not yet handled row
--   of the DBA-named source (envelope fields in snake_case), in event-id order, becomes imported,
--   already_present or quarantined under an explicit registered Bootstrap Delivery Set; resumable
--   and idempotent, with one immutable evidence row per run.
-- Locking: LOCK outbox.outbox_events IN SHARE ROW EXCLUSIVE MODE until commit (appends wait).
-- SQLSTATEs: 22023 source NULL or max_rows outside 1..1000000; 42703 the source lacks a column;
--   OB103 the quartet is not a registered delivery-set definition.
-- Design notes (columns, classifications, evidence): docs/migrations.md#outboxbootstrap_legacy_events
-- Caller: outbox_owner (a migration or a DBA; outbox_owner needs SELECT on the source).
CREATE FUNCTION outbox.bootstrap_legacy_events(
    p_source regclass,
    p_delivery_set_version integer,
    p_definition_schema_version integer,
    p_digest_algorithm_version text,
    p_definition_digest text,
    p_max_rows integer DEFAULT 10000
) RETURNS TABLE (run_id uuid, imported integer, quarantined integer, already_present integer, evidence_sha256 text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    c_columns  constant text[] := ARRAY['event_id', 'event_type', 'event_schema_version', 'aggregate_id',
                                        'aggregate_revision', 'tenant_kind', 'tenant_id', 'workspace_id', 'project_id',
                                        'correlation_id', 'causation_id', 'operation_id', 'payload', 'occurred_at',
                                        'created_at'];
    v_run       uuid := pg_catalog.gen_random_uuid();
    v_source    text;
    v_missing   text;
    v_max_bytes bigint;
    v_pending   integer;
    v_imported  integer;
    v_present   integer;
    v_quar      integer;
    v_before    integer;
    v_reasons   jsonb;
    v_evidence  text;
BEGIN
    IF p_source IS NULL THEN
        RAISE EXCEPTION 'bootstrap_legacy_events: source is NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_rows IS NULL OR p_max_rows NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'bootstrap_legacy_events: max_rows must be between 1 and 1000000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_source := p_source::text;
    IF NOT EXISTS (SELECT 1 FROM outbox.delivery_set_versions v
                    WHERE v.delivery_set_version = p_delivery_set_version
                      AND v.definition_schema_version = p_definition_schema_version
                      AND v.digest_algorithm_version = p_digest_algorithm_version
                      AND v.definition_digest = p_definition_digest) THEN
        RAISE EXCEPTION 'bootstrap delivery set is not a registered definition'
            USING ERRCODE = 'OB103',
                  DETAIL = pg_catalog.format('no registered delivery set (%s, %s, %s, %s)', p_delivery_set_version,
                                             p_definition_schema_version, p_digest_algorithm_version, p_definition_digest),
                  HINT = 'register the Bootstrap Delivery Set first (outboxctl release register FILE bootstrap-...)';
    END IF;
    SELECT pg_catalog.string_agg(c.col, ', ' ORDER BY c.ord) INTO v_missing
      FROM pg_catalog.unnest(c_columns) WITH ORDINALITY AS c(col, ord)
     WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                        WHERE a.attrelid = p_source AND a.attname = c.col AND a.attnum > 0 AND NOT a.attisdropped);
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'bootstrap source % lacks columns: %', v_source, v_missing USING ERRCODE = 'undefined_column';
    END IF;

    -- The append lock (R-BS-4): appends and other bootstraps wait until the caller commits.
    LOCK TABLE outbox.outbox_events IN SHARE ROW EXCLUSIVE MODE;
    SELECT k.value INTO v_max_bytes FROM outbox.kernel_settings k WHERE k.name = 'max_payload_bytes';
    SELECT pg_catalog.count(*) INTO v_before FROM outbox.bootstrap_items i
     WHERE i.source = v_source AND i.classification IN ('imported', 'already_present');

    -- The rows left (not handled by an earlier run), up to max_rows item keys in key order.
    IF pg_catalog.to_regclass('pg_temp._bootstrap_todo') IS NOT NULL THEN
        DROP TABLE pg_temp._bootstrap_todo; -- a second run in the same transaction
    END IF;
    EXECUTE pg_catalog.format($q$
        CREATE TEMP TABLE _bootstrap_todo ON COMMIT DROP AS
        WITH src AS (
            SELECT s.event_id::text AS event_id, s.event_type::text AS event_type,
                   s.event_schema_version::text AS event_schema_version, s.aggregate_id::text AS aggregate_id,
                   s.aggregate_revision::text AS aggregate_revision, s.tenant_kind::text AS tenant_kind,
                   s.tenant_id::text AS tenant_id, s.workspace_id::text AS workspace_id, s.project_id::text AS project_id,
                   s.correlation_id::text AS correlation_id, s.causation_id::text AS causation_id,
                   s.operation_id::text AS operation_id, s.payload::text AS payload,
                   s.occurred_at::timestamptz AS occurred_at, s.created_at::timestamptz AS created_at,
                   pg_catalog.to_jsonb(s) AS legacy_row
              FROM %s AS s
        ), keyed AS (
            SELECT src.*,
                   CASE WHEN pg_catalog.lower(src.event_id) ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                        THEN pg_catalog.lower(src.event_id)
                        ELSE 'row:' || pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(src.legacy_row::text, 'UTF8')), 'hex') END AS item_key
              FROM src
        ), left_rows AS (
            SELECT k.*, pg_catalog.dense_rank() OVER (ORDER BY k.item_key) AS key_rank,
                   pg_catalog.dense_rank() OVER (ORDER BY k.item_key)
                   + pg_catalog.dense_rank() OVER (ORDER BY k.item_key DESC) - 1 AS left_keys
              FROM keyed k
             WHERE NOT EXISTS (SELECT 1 FROM outbox.bootstrap_items i WHERE i.source = $1 AND i.item_key = k.item_key)
        )
        SELECT * FROM left_rows WHERE key_rank <= $2
    $q$, v_source) USING v_source, p_max_rows;

    WITH v AS MATERIALIZED (
        -- LATERAL: one call per row ((f(x)).* would call the function once per output column)
        SELECT t.item_key, t.legacy_row, t.created_at AS legacy_created_at, e.*
          FROM pg_temp._bootstrap_todo t
         CROSS JOIN LATERAL outbox._bootstrap_envelope(t.event_id, t.event_type, t.event_schema_version, t.aggregate_id,
                                           t.aggregate_revision, t.tenant_kind, t.tenant_id, t.workspace_id, t.project_id,
                                           t.correlation_id, t.causation_id, t.operation_id, t.payload, t.occurred_at,
                                           v_max_bytes) AS e
    ), g AS MATERIALIZED (
        SELECT v.*,
               pg_catalog.count(*) OVER w AS copies,
               pg_catalog.count(*) FILTER (WHERE v.reason IS NOT NULL) OVER w AS bad_copies,
               pg_catalog.min(v.event_envelope_sha256) OVER w AS min_sha256,
               pg_catalog.max(v.event_envelope_sha256) OVER w AS max_sha256,
               pg_catalog.row_number() OVER (PARTITION BY v.item_key ORDER BY v.reason NULLS FIRST, v.event_envelope_sha256) AS rn,
               (SELECT x.event_envelope_sha256 FROM outbox.outbox_events x WHERE x.event_id = v.event_id) AS hot_sha256,
               (SELECT x.event_envelope_sha256 FROM outbox.archived_events x WHERE x.event_id = v.event_id) AS archived_sha256,
               (SELECT pg_catalog.count(*) FROM outbox.delivery_set_members m
                 WHERE m.delivery_set_version = p_delivery_set_version AND m.definition_digest = p_definition_digest
                   AND m.event_type = v.event_type AND m.event_schema_version = v.schema_version AND m.mandatory) AS members
          FROM v
        WINDOW w AS (PARTITION BY v.item_key)
    ), c AS MATERIALIZED (
        SELECT g.*,
               CASE WHEN g.copies > 1 AND (g.bad_copies > 0 OR g.min_sha256 <> g.max_sha256) THEN 'digest_conflict'
                    WHEN g.reason IS NOT NULL THEN g.reason
                    WHEN coalesce(g.hot_sha256, g.archived_sha256) <> g.event_envelope_sha256 THEN 'digest_conflict'
                    WHEN coalesce(g.hot_sha256, g.archived_sha256) IS NOT NULL THEN NULL
                    WHEN g.members = 0 THEN 'unsupported_schema'
               END AS quarantine_reason,
               CASE WHEN g.copies > 1 AND (g.bad_copies > 0 OR g.min_sha256 <> g.max_sha256)
                        THEN 'the source holds this event id more than once with different envelopes'
                    WHEN g.reason IS NOT NULL THEN g.detail
                    WHEN coalesce(g.hot_sha256, g.archived_sha256) <> g.event_envelope_sha256
                        THEN pg_catalog.format('event id present in the kernel (%s) with digest %s, legacy digest %s',
                                               CASE WHEN g.hot_sha256 IS NULL THEN 'archived' ELSE 'hot' END,
                                               coalesce(g.hot_sha256, g.archived_sha256), g.event_envelope_sha256)
                    WHEN g.members = 0
                        THEN pg_catalog.format('(%s, %s) has no mandatory member in delivery set version %s',
                                               g.event_type, g.schema_version, p_delivery_set_version)
               END AS quarantine_detail
          FROM g WHERE g.rn = 1
    ), new_events AS (
        INSERT INTO outbox.outbox_events
            (event_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
             delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
             aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id,
             correlation_id, causation_id, operation_id, event_payload,
             event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, created_at,
             event_envelope_canonical)
        SELECT c.event_id, c.event_type, c.schema_version, p_delivery_set_version, p_definition_schema_version,
               p_digest_algorithm_version, p_definition_digest,
               c.aggregate_id, c.aggregate_revision, c.tenant_kind, c.tenant_id, c.workspace_id, c.project_id,
               c.correlation_id, c.causation_id, c.operation_id, c.event_payload,
               'jcs-sha256-v1', c.event_envelope_sha256, c.occurred_at, coalesce(c.legacy_created_at, c.occurred_at),
               c.event_envelope_canonical
          FROM c
         WHERE c.quarantine_reason IS NULL AND c.hot_sha256 IS NULL AND c.archived_sha256 IS NULL
        RETURNING outbox_events.event_id, outbox_events.event_type, outbox_events.schema_version,
                  outbox_events.aggregate_id, outbox_events.aggregate_revision
    ), new_deliveries AS (
        INSERT INTO outbox.outbox_deliveries
            (destination, event_id, delivery_set_version, consumer_name, expected_receipt_type,
             expected_receipt_schema_version, required_projection_name, required_projection_version,
             mandatory, aggregate_id, aggregate_revision)
        SELECT m.destination, n.event_id, m.delivery_set_version, m.consumer_name, m.expected_receipt_type,
               m.expected_receipt_schema_version, m.projection_name, m.projection_version,
               true, n.aggregate_id, n.aggregate_revision
          FROM new_events n
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = p_delivery_set_version AND m.definition_digest = p_definition_digest
           AND m.event_type = n.event_type AND m.event_schema_version = n.schema_version AND m.mandatory
        RETURNING outbox_deliveries.destination
    ), items AS (
        INSERT INTO outbox.bootstrap_items
            (source, item_key, run_id, event_id, classification, reason, detail, event_envelope_sha256,
             delivery_set_version, legacy_row)
        SELECT v_source, c.item_key, v_run, c.event_id,
               CASE WHEN c.quarantine_reason IS NOT NULL THEN 'quarantined'
                    WHEN c.hot_sha256 IS NOT NULL OR c.archived_sha256 IS NOT NULL THEN 'already_present'
                    ELSE 'imported' END,
               c.quarantine_reason, c.quarantine_detail,
               CASE WHEN c.quarantine_reason IS NULL THEN c.event_envelope_sha256 END,
               p_delivery_set_version,
               CASE WHEN c.quarantine_reason IS NOT NULL THEN c.legacy_row END
          FROM c
        RETURNING bootstrap_items.classification, bootstrap_items.reason
    ), notified AS (
        SELECT pg_catalog.count(pg_catalog.pg_notify('outbox_delivery', n.destination)) AS destinations
          FROM (SELECT DISTINCT d.destination FROM new_deliveries d) AS n
    )
    SELECT pg_catalog.count(*) FILTER (WHERE i.classification = 'imported'),
           pg_catalog.count(*) FILTER (WHERE i.classification = 'already_present'),
           pg_catalog.count(*) FILTER (WHERE i.classification = 'quarantined'),
           coalesce((SELECT pg_catalog.jsonb_object_agg(r.reason, r.n)
                                  FROM (SELECT i2.reason, pg_catalog.count(*) AS n FROM items i2
                                         WHERE i2.reason IS NOT NULL GROUP BY i2.reason) r), '{}'::jsonb)
      INTO v_imported, v_present, v_quar, v_reasons
      FROM items i CROSS JOIN notified;

    SELECT coalesce(pg_catalog.max(t.left_keys), 0)::integer - (v_imported + v_present + v_quar)
      INTO v_pending FROM pg_temp._bootstrap_todo t;
    DROP TABLE pg_temp._bootstrap_todo;

    SELECT outbox._sha256_hex(coalesce(pg_catalog.string_agg(
               i.event_id::text || ' ' || i.event_envelope_sha256 || E'\n', '' ORDER BY i.event_id), ''))
      INTO v_evidence
      FROM outbox.bootstrap_items i
     WHERE i.source = v_source AND i.classification IN ('imported', 'already_present');

    INSERT INTO outbox.bootstrap_runs
        (run_id, source, delivery_set_version, definition_schema_version, digest_algorithm_version, definition_digest,
         max_rows, run_by, started_at, finished_at, imported, already_present, quarantined, quarantine_reasons,
         present_before, rows_left, evidence_sha256)
    VALUES (v_run, v_source, p_delivery_set_version, p_definition_schema_version, p_digest_algorithm_version,
            p_definition_digest, p_max_rows, session_user, pg_catalog.now(), pg_catalog.clock_timestamp(),
            v_imported, v_present, v_quar, v_reasons, v_before, greatest(v_pending, 0), v_evidence);

    RETURN QUERY SELECT v_run, v_imported, v_quar, v_before + v_present, v_evidence;
END
$fn$;
COMMENT ON FUNCTION outbox.bootstrap_legacy_events(regclass, integer, integer, text, text, integer) IS
    'Bootstrap: import a DBA-named legacy event table under an append lock against a registered Bootstrap Delivery Set; resumable, idempotent, one evidence row per run (SPEC R-BS-1..4). Caller: outbox_owner.';
REVOKE ALL ON FUNCTION outbox.bootstrap_legacy_events(regclass, integer, integer, text, text, integer) FROM PUBLIC;


-- append_events' body changed (an archived id is refused): re-created from its file (rule 2).
DROP FUNCTION outbox.append_events(json, text[], text[]);
-- outbox.append_events(events json, canonical_texts text[] DEFAULT NULL,
--                      event_envelope_sha256s text[] DEFAULT NULL)
--   RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count int)
--   (public, SPEC §3.2, §13, R-AP-1..7, R-AK-9, D-2, D-3; HP-1..4)
-- Purpose: append many EventEnvelope@1 objects inside the caller's business transaction with
--   exactly the rules of outbox.append_event (which is this function with one element): envelope
--   and digest rules (outbox._append_validate), the active definition's quartet frozen, one pending
--   delivery per mandatory member, idempotent re-append of the same digest. One row per element,
--   in input order. The deferred constraint triggers prove every delivery set at COMMIT (R-AP-5).
-- Raises (any invalid element fails the whole call): OB103 no active definition / pair not
--   applicable / no mandatory member; OB105 envelope invalid, eventId reused with other content
--   or archived; OB201 not canonicalizable.
-- Design notes (hot-path predicate, plans, locking): docs/contract.md#outboxappend_events
-- Caller: outbox_producer.
CREATE FUNCTION outbox.append_events(
    p_events json,
    p_canonical_texts text[] DEFAULT NULL,
    p_event_envelope_sha256s text[] DEFAULT NULL
) RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_count     integer;
    v_max_bytes bigint;
BEGIN
    IF p_events IS NULL THEN
        PERFORM outbox._envelope_fail('events is NULL');
    END IF;
    IF pg_catalog.json_typeof(p_events) <> 'array' THEN
        PERFORM outbox._envelope_fail('events must be a JSON array of EventEnvelope@1 objects');
    END IF;
    v_count := pg_catalog.json_array_length(p_events);
    IF (p_canonical_texts IS NULL) <> (p_event_envelope_sha256s IS NULL) THEN
        PERFORM outbox._envelope_fail('canonical_texts and event_envelope_sha256s go together: pass both or neither');
    END IF;
    IF p_canonical_texts IS NOT NULL AND v_count > 0
       AND (pg_catalog.array_ndims(p_canonical_texts) IS DISTINCT FROM 1
            OR pg_catalog.array_ndims(p_event_envelope_sha256s) IS DISTINCT FROM 1
            OR pg_catalog.array_lower(p_canonical_texts, 1) <> 1
            OR pg_catalog.array_lower(p_event_envelope_sha256s, 1) <> 1
            OR pg_catalog.array_length(p_canonical_texts, 1) <> v_count
            OR pg_catalog.array_length(p_event_envelope_sha256s, 1) <> v_count) THEN
        PERFORM outbox._envelope_fail('canonical_texts and event_envelope_sha256s must have one entry per event, from index 1');
    END IF;
    SELECT k.value INTO v_max_bytes FROM outbox.kernel_settings k WHERE k.name = 'max_payload_bytes';

    RETURN QUERY
    WITH f AS MATERIALIZED (
        -- the cheap predicate (builtins only; every cast guarded by the pattern it needs)
        SELECT k.ord, CASE WHEN NOT k.fast THEN k.raw END AS raw, k.ct, k.sha,
               CASE WHEN k.fast THEN k.j END AS j, k.rev, k.occurred, k.fast
          FROM (SELECT j.ord, j.raw, j.ct, j.sha, j.j, j.rev, j.occurred,
               COALESCE(j.j IS NOT NULL
                   AND j.sha = pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(j.ct, 'UTF8')), 'hex')
                   AND j.rev <= 9007199254740991
                   AND j.occurred IS NOT NULL
                   -- (the pattern admits real times only, each written as to_char writes it back)
                   AND NOT EXISTS (SELECT 1 FROM outbox.envelope_refinements r
                                    WHERE r.event_type = j.j ->> 'eventType' AND r.event_schema_version = j.j ->> 'eventSchemaVersion'
                                      AND NOT (CASE WHEN r.required_field = 'projectId' THEN (j.j -> 'tenant') ? 'projectId'
                                                    ELSE j.j ? r.required_field END))
                   AND j.canonical = j.ct, false) AS fast
          FROM (SELECT a.*,
                       CASE WHEN pg_catalog.jsonb_typeof(a.j -> 'aggregateRevision') = 'number'
                                 AND pg_catalog.scale((a.j -> 'aggregateRevision')::numeric) = 0
                                 AND (a.j -> 'aggregateRevision')::numeric BETWEEN 1 AND 9007199254740991
                            THEN (a.j -> 'aggregateRevision')::numeric::bigint END AS rev,
                       -- occurredAt: YYYY-MM-DDTHH:MM:SS.ffffffZ, a real UTC time (year 0001..9999,
                       -- month 01..12, the month's days, hour 00..23, minute and second 00..59)
                       CASE WHEN pg_catalog.length(a.j ->> 'occurredAt') = 27
                                 AND pg_catalog.translate(a.j ->> 'occurredAt', '0123456789', '') = '--T::.Z'
                                 AND pg_catalog.strpos(a.j ->> 'occurredAt', '-') = 5 AND pg_catalog.substr(a.j ->> 'occurredAt', 8, 1) = '-'
                                 AND pg_catalog.strpos(a.j ->> 'occurredAt', 'T') = 11 AND pg_catalog.strpos(a.j ->> 'occurredAt', ':') = 14
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 17, 1) = ':' AND pg_catalog.strpos(a.j ->> 'occurredAt', '.') = 20
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 27, 1) = 'Z'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 1, 4) COLLATE "C" <> '0000'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 6, 2) COLLATE "C" BETWEEN '01' AND '12'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 9, 2) COLLATE "C" BETWEEN '01' AND '31'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 12, 2) COLLATE "C" <= '23'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 15, 2) COLLATE "C" <= '59'
                                 AND pg_catalog.substr(a.j ->> 'occurredAt', 18, 2) COLLATE "C" <= '59'
                                 AND (pg_catalog.substr(a.j ->> 'occurredAt', 9, 2) COLLATE "C" <= '28'
                                      OR pg_catalog.substr(a.j ->> 'occurredAt', 9, 2)::integer
                                     <= pg_catalog.date_part('day', pg_catalog.make_date(pg_catalog.substr(a.j ->> 'occurredAt', 1, 4)::integer,
                                                                                         pg_catalog.substr(a.j ->> 'occurredAt', 6, 2)::integer, 1)
                                                                    + interval '1 month - 1 day'))
                            THEN (a.j ->> 'occurredAt')::timestamptz END AS occurred,
                       CASE WHEN pg_catalog.jsonb_typeof(a.j) = 'object'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventId') = 'string'
                                 -- (the patterns of outbox._append_validate, written with translate():
                                 -- a regular expression per element cost more than the rest)
                                 AND pg_catalog.length(a.j ->> 'eventId') = 36
                                 AND pg_catalog.translate(a.j ->> 'eventId', '0123456789abcdef', '') = '----'
                                 AND pg_catalog.strpos(a.j ->> 'eventId', '-') = 9
                                 AND pg_catalog.substr(a.j ->> 'eventId', 14, 1) = '-' AND pg_catalog.substr(a.j ->> 'eventId', 19, 1) = '-'
                                 AND pg_catalog.substr(a.j ->> 'eventId', 24, 1) = '-'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventType') = 'string'
                                 AND pg_catalog.translate(pg_catalog.left(a.j ->> 'eventType', 1), 'abcdefghijklmnopqrstuvwxyz0123456789', '') = ''
                                 AND pg_catalog.translate(a.j ->> 'eventType', 'abcdefghijklmnopqrstuvwxyz0123456789._@-', '') = ''
                                 AND pg_catalog.length(a.j ->> 'eventType') > 0
                                 AND pg_catalog.jsonb_typeof(a.j -> 'eventSchemaVersion') = 'string'
                                 AND pg_catalog.translate(pg_catalog.left(a.j ->> 'eventSchemaVersion', 1), 'abcdefghijklmnopqrstuvwxyz0123456789', '') = ''
                                 AND pg_catalog.translate(a.j ->> 'eventSchemaVersion', 'abcdefghijklmnopqrstuvwxyz0123456789._@-', '') = ''
                                 AND pg_catalog.length(a.j ->> 'eventSchemaVersion') > 0
                                 AND pg_catalog.jsonb_typeof(a.j -> 'aggregateId') = 'string' AND pg_catalog.length(a.j ->> 'aggregateId') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant') = 'object'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'tenantKind') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'tenantKind') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'tenantId') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'tenantId') BETWEEN 1 AND 200
                                 AND pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'workspaceId') = 'string' AND pg_catalog.length(a.j -> 'tenant' ->> 'workspaceId') BETWEEN 1 AND 200
                                 AND (NOT (a.j -> 'tenant') ? 'projectId' OR (pg_catalog.jsonb_typeof(a.j -> 'tenant' -> 'projectId') = 'string'
                                                                               AND pg_catalog.length(a.j -> 'tenant' ->> 'projectId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'correlationId' OR (pg_catalog.jsonb_typeof(a.j -> 'correlationId') = 'string'
                                                                    AND pg_catalog.length(a.j ->> 'correlationId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'causationId' OR (pg_catalog.jsonb_typeof(a.j -> 'causationId') = 'string'
                                                                  AND pg_catalog.length(a.j ->> 'causationId') BETWEEN 1 AND 200))
                                 AND (NOT a.j ? 'operationId' OR (pg_catalog.jsonb_typeof(a.j -> 'operationId') = 'string'
                                                                  AND pg_catalog.length(a.j ->> 'operationId') BETWEEN 1 AND 200))
                                 AND pg_catalog.jsonb_typeof(a.j -> 'occurredAt') = 'string'
                                 AND pg_catalog.jsonb_typeof(a.j -> 'payload') = 'object'
                            THEN
                       -- the RFC 8785 text of the envelope, members in their fixed order: only the
                       -- EventEnvelope@1 fields are rebuilt (absent required ones make it NULL), so
                       -- an unknown field, an unknown tenant field or a duplicate name makes it
                       -- differ from the submitted text
                       '{"aggregateId":' || (a.j -> 'aggregateId')::text
                       || ',"aggregateRevision":' || (a.j -> 'aggregateRevision')::text
                       || COALESCE(',"causationId":' || (a.j -> 'causationId')::text, '')
                       || COALESCE(',"correlationId":' || (a.j -> 'correlationId')::text, '')
                       || ',"eventId":' || (a.j -> 'eventId')::text
                       || ',"eventSchemaVersion":' || (a.j -> 'eventSchemaVersion')::text
                       || ',"eventType":' || (a.j -> 'eventType')::text
                       || ',"occurredAt":' || (a.j -> 'occurredAt')::text
                       || COALESCE(',"operationId":' || (a.j -> 'operationId')::text, '')
                       || ',"payload":' || (SELECT '{' || COALESCE(pg_catalog.string_agg(
                              CASE WHEN pg_catalog.octet_length(e1.key) = pg_catalog.length(e1.key) AND pg_catalog.octet_length(e1.key) <= 1024
                                   THEN pg_catalog.to_json(e1.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e1.value)
                                       WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                           CASE WHEN pg_catalog.octet_length(e2.key) = pg_catalog.length(e2.key) AND pg_catalog.octet_length(e2.key) <= 1024
                                                THEN pg_catalog.to_json(e2.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e2.value)
                                                    WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                                        CASE WHEN pg_catalog.octet_length(e3.key) = pg_catalog.length(e3.key) AND pg_catalog.octet_length(e3.key) <= 1024
                                                             THEN pg_catalog.to_json(e3.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e3.value)
                                                                 WHEN 'number' THEN CASE WHEN pg_catalog.scale((e3.value)::numeric) = 0 AND pg_catalog.abs((e3.value)::numeric) <= 9007199254740991 THEN (e3.value)::text END
                                                                 WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                                 ELSE (e3.value)::text END END,
                                                        ',' ORDER BY e3.key COLLATE "C"), '') || '}'
                                                       FROM pg_catalog.jsonb_each(e2.value) AS e3)
                                                    WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                                        CASE pg_catalog.jsonb_typeof(a3.value)
                                                            WHEN 'number' THEN CASE WHEN pg_catalog.scale((a3.value)::numeric) = 0 AND pg_catalog.abs((a3.value)::numeric) <= 9007199254740991 THEN (a3.value)::text END
                                                            WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                            ELSE (a3.value)::text END,
                                                        ',' ORDER BY a3.ordinality), '') || ']'
                                                       FROM pg_catalog.jsonb_array_elements(e2.value) WITH ORDINALITY AS a3(value, ordinality))
                                                    WHEN 'number' THEN CASE WHEN pg_catalog.scale((e2.value)::numeric) = 0 AND pg_catalog.abs((e2.value)::numeric) <= 9007199254740991 THEN (e2.value)::text END
                                                    ELSE (e2.value)::text END END,
                                           ',' ORDER BY e2.key COLLATE "C"), '') || '}'
                                          FROM pg_catalog.jsonb_each(e1.value) AS e2)
                                       WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                           CASE pg_catalog.jsonb_typeof(a2.value)
                                               WHEN 'object' THEN (SELECT '{' || COALESCE(pg_catalog.string_agg(
                                                   CASE WHEN pg_catalog.octet_length(e3.key) = pg_catalog.length(e3.key) AND pg_catalog.octet_length(e3.key) <= 1024
                                                        THEN pg_catalog.to_json(e3.key)::text || ':' || CASE pg_catalog.jsonb_typeof(e3.value)
                                                            WHEN 'number' THEN CASE WHEN pg_catalog.scale((e3.value)::numeric) = 0 AND pg_catalog.abs((e3.value)::numeric) <= 9007199254740991 THEN (e3.value)::text END
                                                            WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                            ELSE (e3.value)::text END END,
                                                   ',' ORDER BY e3.key COLLATE "C"), '') || '}'
                                                  FROM pg_catalog.jsonb_each(a2.value) AS e3)
                                               WHEN 'array' THEN (SELECT '[' || COALESCE(pg_catalog.string_agg(
                                                   CASE pg_catalog.jsonb_typeof(a3.value)
                                                       WHEN 'number' THEN CASE WHEN pg_catalog.scale((a3.value)::numeric) = 0 AND pg_catalog.abs((a3.value)::numeric) <= 9007199254740991 THEN (a3.value)::text END
                                                       WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                                                       ELSE (a3.value)::text END,
                                                   ',' ORDER BY a3.ordinality), '') || ']'
                                                  FROM pg_catalog.jsonb_array_elements(a2.value) WITH ORDINALITY AS a3(value, ordinality))
                                               WHEN 'number' THEN CASE WHEN pg_catalog.scale((a2.value)::numeric) = 0 AND pg_catalog.abs((a2.value)::numeric) <= 9007199254740991 THEN (a2.value)::text END
                                               ELSE (a2.value)::text END,
                                           ',' ORDER BY a2.ordinality), '') || ']'
                                          FROM pg_catalog.jsonb_array_elements(e1.value) WITH ORDINALITY AS a2(value, ordinality))
                                       WHEN 'number' THEN CASE WHEN pg_catalog.scale((e1.value)::numeric) = 0 AND pg_catalog.abs((e1.value)::numeric) <= 9007199254740991 THEN (e1.value)::text END
                                       ELSE (e1.value)::text END END,
                              ',' ORDER BY e1.key COLLATE "C"), '') || '}'
                             FROM pg_catalog.jsonb_each(a.j -> 'payload') AS e1)
                       || ',"tenant":{' || pg_catalog.concat_ws(',',
                              '"projectId":' || (a.j -> 'tenant' -> 'projectId')::text,
                              '"tenantId":' || (a.j -> 'tenant' -> 'tenantId')::text,
                              '"tenantKind":' || (a.j -> 'tenant' -> 'tenantKind')::text,
                              '"workspaceId":' || (a.j -> 'tenant' -> 'workspaceId')::text) || '}}'
                       END AS canonical
                  FROM (
                -- parsed once: the element's text (json_array_elements), its canonical text and digest,
                -- and ONE jsonb of it on the hot path (a \u0000 escape, which no jsonb can hold, and an
                -- oversized element are left to the full rule, which raises what it always did)
                SELECT x.ord::integer AS ord, x.raw, t.ct, t.sha,
                       CASE WHEN t.ct IS NOT NULL AND t.sha IS NOT NULL AND pg_catalog.octet_length(t.ct) <= v_max_bytes
                                 AND x.raw::text = t.ct AND pg_catalog.strpos(t.ct, '\u0000') = 0
                            THEN t.ct::jsonb END AS j
                  FROM pg_catalog.json_array_elements(p_events) WITH ORDINALITY AS x(raw, ord)
                 CROSS JOIN LATERAL (SELECT p_canonical_texts[x.ord::integer] AS ct,
                                            p_event_envelope_sha256s[x.ord::integer] AS sha) AS t
                        OFFSET 0) AS a
                OFFSET 0) AS j
                OFFSET 0) AS k
    ), v AS MATERIALIZED (
        -- accepted by the predicate: the typed columns straight from the jsonb
        SELECT f.ord, (f.j ->> 'eventId')::uuid AS event_id, f.j ->> 'eventType' AS event_type,
               f.j ->> 'eventSchemaVersion' AS schema_version, f.j ->> 'aggregateId' AS aggregate_id,
               f.rev AS aggregate_revision, f.j -> 'tenant' ->> 'tenantKind' AS tenant_kind,
               f.j -> 'tenant' ->> 'tenantId' AS tenant_id, f.j -> 'tenant' ->> 'workspaceId' AS workspace_id,
               f.j -> 'tenant' ->> 'projectId' AS project_id, f.j ->> 'correlationId' AS correlation_id,
               f.j ->> 'causationId' AS causation_id, f.j ->> 'operationId' AS operation_id,
               f.j -> 'payload' AS event_payload, f.occurred AS occurred_at,
               f.sha AS event_envelope_sha256, f.ct AS event_envelope_canonical
          FROM f
         WHERE f.fast
        UNION ALL
        -- every other element: the full rule, element by element in input order (the first
        -- break raises its SQLSTATE and detail)
        SELECT e.ord, (e.r).*
          FROM (SELECT s.ord,
                       outbox._append_validate(s.raw, s.ct, s.sha, v_max_bytes,
                                               CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', s.ord - 1)
                                                    ELSE '' END) AS r
                  FROM (SELECT f.ord, f.raw, f.ct, f.sha FROM f WHERE NOT f.fast ORDER BY f.ord) AS s
                OFFSET 0) AS e
    ), c AS MATERIALIZED (
        -- (scalar subqueries, not joins: one primary-key lookup per element whatever the
        -- planner believes about the tables' sizes when the plan is cached)
        SELECT v.*, a.delivery_set_version, a.definition_schema_version, a.digest_algorithm_version,
               a.definition_digest,
               (SELECT x.event_envelope_sha256 FROM outbox.outbox_events x WHERE x.event_id = v.event_id) AS existing_sha256,
               -- R-RT-1: one primary-key probe of the archive per element
               EXISTS (SELECT 1 FROM outbox.archived_events x WHERE x.event_id = v.event_id) AS archived,
               (SELECT pg_catalog.count(*) FROM outbox.delivery_set_members m
                 WHERE m.delivery_set_version = a.delivery_set_version AND m.event_type = v.event_type
                   AND m.event_schema_version = v.schema_version AND m.mandatory)::integer AS members,
               pg_catalog.min(v.event_envelope_sha256) OVER same_id AS min_sha256,
               pg_catalog.max(v.event_envelope_sha256) OVER same_id AS max_sha256,
               pg_catalog.min(v.ord) OVER same_id AS first_ord
          FROM v
          LEFT JOIN outbox.delivery_set_versions a ON a.status = 'active'
        WINDOW same_id AS (PARTITION BY v.event_id)
    ), checked AS MATERIALIZED (
        -- The definition rules, element by element in input order; the first break raises.
        SELECT o.*
          FROM (SELECT c.*, CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', c.ord - 1) ELSE '' END AS label
                  FROM c ORDER BY c.ord) AS o
         WHERE (CASE
                  WHEN o.delivery_set_version IS NULL THEN
                      outbox._append_fail('OB103', 'no active delivery-set definition', NULL,
                          'register and activate a delivery set (outboxctl release register / activate)')
                  WHEN NOT EXISTS (SELECT 1 FROM outbox.delivery_set_applicable_events ae
                                    WHERE ae.delivery_set_version = o.delivery_set_version
                                      AND ae.event_type = o.event_type AND ae.event_schema_version = o.schema_version) THEN
                      outbox._append_fail('OB103', 'event pair not applicable under the active delivery set',
                          o.label || pg_catalog.format('(%s, %s) is not applicable in delivery set version %s',
                                            o.event_type, o.schema_version, o.delivery_set_version), NULL)
                  WHEN o.archived THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s was archived by the retention procedure and can never be appended again', o.event_id), NULL)
                  WHEN o.existing_sha256 <> o.event_envelope_sha256 THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s already exists with a different envelope digest', o.event_id), NULL)
                  WHEN o.min_sha256 <> o.max_sha256 THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s appears more than once with different envelope digests', o.event_id), NULL)
                  WHEN o.existing_sha256 IS NULL AND o.members = 0 THEN
                      outbox._append_fail('OB103', 'no mandatory member for this event pair',
                          o.label || pg_catalog.format('(%s, %s) has no mandatory member in delivery set version %s',
                                            o.event_type, o.schema_version, o.delivery_set_version), NULL)
                END) IS NULL
    ), fresh AS MATERIALIZED (
        -- new events, each once even when the call repeats it
        SELECT k.* FROM checked k WHERE k.existing_sha256 IS NULL AND k.ord = k.first_ord
    ), chain AS MATERIALIZED (
        -- per_aggregate destinations (R-CL-6, R-CL-7): a new delivery that waits behind an earlier
        -- revision of its aggregate - open in the table, or earlier in this call - is parked at
        -- available_at = 'infinity', outside the claim's index range, so blocked chains cost a
        -- claim nothing; outbox._release_successors makes it claimable when the head ends.
        SELECT f.event_id, m.destination, f.aggregate_id, f.aggregate_revision,
               pg_catalog.row_number() OVER (PARTITION BY m.destination, f.aggregate_id
                                             ORDER BY f.aggregate_revision, f.ord) AS in_call
          FROM fresh f
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = f.delivery_set_version AND m.event_type = f.event_type
           AND m.event_schema_version = f.schema_version AND m.mandatory
          JOIN outbox.delivery_destinations dd ON dd.destination = m.destination AND dd.ordering = 'per_aggregate'
    ), heads AS MATERIALIZED (
        -- the lowest open revision of each such chain
        SELECT h.destination, h.event_id
          FROM (SELECT DISTINCT c.destination, c.aggregate_id FROM chain c) AS k
         CROSS JOIN LATERAL (
                SELECT o.destination, o.event_id
                  FROM outbox.outbox_deliveries o
                 WHERE o.destination = k.destination AND o.aggregate_id = k.aggregate_id
                   AND o.status IN ('pending', 'leased')
                 ORDER BY o.aggregate_revision
                 LIMIT 1) AS h
    ), held AS MATERIALIZED (
        -- held FOR SHARE until commit (in the key order outcome functions lock in): the head
        -- cannot become terminal - and release its successors - before this transaction's parked
        -- rows are visible; one that became terminal meanwhile drops out here (re-checked).
        SELECT d.destination, d.aggregate_id, d.aggregate_revision
          FROM outbox.outbox_deliveries d
          JOIN heads ON d.destination = heads.destination AND d.event_id = heads.event_id
         WHERE d.status IN ('pending', 'leased')
         ORDER BY d.destination, d.event_id
           FOR SHARE OF d
    ), parked AS MATERIALIZED (
        SELECT c.event_id, c.destination
          FROM chain c
         WHERE c.in_call > 1
            OR EXISTS (SELECT 1 FROM held h
                        WHERE h.destination = c.destination AND h.aggregate_id = c.aggregate_id
                          AND h.aggregate_revision < c.aggregate_revision)
    ), inserted_events AS (
        INSERT INTO outbox.outbox_events
            (event_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
             delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
             aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id,
             correlation_id, causation_id, operation_id, event_payload,
             event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, event_envelope_canonical)
        SELECT f.event_id, f.event_type, f.schema_version, f.delivery_set_version, f.definition_schema_version,
               f.digest_algorithm_version, f.definition_digest,
               f.aggregate_id, f.aggregate_revision, f.tenant_kind, f.tenant_id, f.workspace_id, f.project_id,
               f.correlation_id, f.causation_id, f.operation_id, f.event_payload,
               'jcs-sha256-v1', f.event_envelope_sha256, f.occurred_at, f.event_envelope_canonical
          FROM fresh f
        RETURNING outbox_events.event_id
    ), inserted_deliveries AS (
        -- one pending delivery per mandatory member (R-AP-4, R-AP-6)
        INSERT INTO outbox.outbox_deliveries
            (destination, event_id, delivery_set_version, consumer_name, expected_receipt_type,
             expected_receipt_schema_version, required_projection_name, required_projection_version,
             mandatory, aggregate_id, aggregate_revision, available_at)
        SELECT m.destination, f.event_id, m.delivery_set_version, m.consumer_name, m.expected_receipt_type,
               m.expected_receipt_schema_version, m.projection_name, m.projection_version,
               true, f.aggregate_id, f.aggregate_revision,
               CASE WHEN EXISTS (SELECT 1 FROM parked p WHERE p.event_id = f.event_id AND p.destination = m.destination)
                    THEN 'infinity'::timestamptz ELSE pg_catalog.now() END
          FROM fresh f
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = f.delivery_set_version AND m.event_type = f.event_type
           AND m.event_schema_version = f.schema_version AND m.mandatory
        RETURNING outbox_deliveries.destination
    ), notified AS (
        SELECT pg_catalog.count(pg_catalog.pg_notify('outbox_delivery', n.destination)) AS destinations
          FROM (SELECT DISTINCT d.destination FROM inserted_deliveries d) AS n
    )
    SELECT k.event_id, k.event_envelope_sha256,
           CASE WHEN k.existing_sha256 IS NULL THEN k.members
                ELSE (SELECT pg_catalog.count(*)::integer FROM outbox.outbox_deliveries d WHERE d.event_id = k.event_id) END
      FROM checked k
     CROSS JOIN notified
     ORDER BY k.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.append_events(json, text[], text[]) IS
    'Append many EventEnvelope@1 objects (a JSON array) with the rules of append_event, set-based; rows in input order (SPEC §3.2, §13, R-AK-9, D-2). Raises OB103, OB105, OB201. Caller: outbox_producer.';
REVOKE ALL ON FUNCTION outbox.append_events(json, text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_events(json, text[], text[]) TO outbox_producer;


-- R-RT-1: one logical source, hot and archived, for auditors and the read model.
CREATE VIEW outbox.event_source AS
SELECT e.event_id, e.event_type, e.schema_version, e.delivery_set_version,
       e.delivery_set_definition_schema_version AS definition_schema_version,
       e.delivery_set_definition_digest_algorithm_version AS digest_algorithm_version,
       e.delivery_set_definition_digest AS definition_digest,
       -- the envelope as outbox._event_envelope builds it (a view calls functions with the
       -- reader's rights, and that helper is private)
       pg_catalog.jsonb_build_object(
           'eventId', e.event_id::text, 'eventType', e.event_type, 'eventSchemaVersion', e.schema_version,
           'aggregateId', e.aggregate_id, 'aggregateRevision', e.aggregate_revision,
           'tenant', pg_catalog.jsonb_build_object('tenantKind', e.tenant_kind, 'tenantId', e.tenant_id,
                                                   'workspaceId', e.workspace_id)
                     || CASE WHEN e.project_id IS NULL THEN '{}'::jsonb
                             ELSE pg_catalog.jsonb_build_object('projectId', e.project_id) END,
           'occurredAt', pg_catalog.to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'payload', e.event_payload)
       || CASE WHEN e.correlation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('correlationId', e.correlation_id) END
       || CASE WHEN e.causation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('causationId', e.causation_id) END
       || CASE WHEN e.operation_id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('operationId', e.operation_id) END
           AS envelope,
       e.event_envelope_sha256, 'hot'::text AS location
  FROM outbox.outbox_events e
UNION ALL
SELECT a.event_id, a.event_type, a.schema_version, a.delivery_set_version,
       a.delivery_set_definition_schema_version, a.delivery_set_definition_digest_algorithm_version,
       a.delivery_set_definition_digest, a.event_envelope_canonical::jsonb, a.event_envelope_sha256, 'archive'::text
  FROM outbox.archived_events a;
COMMENT ON VIEW outbox.event_source IS
    'Every event, hot or archived, with its frozen quartet, envelope and digest; location hot|archive (SPEC R-RT-1, §13). Read-only.';

-- R-BS-3: the visible bootstrap quarantine.
CREATE VIEW outbox.bootstrap_quarantine AS
SELECT i.source, i.item_key, i.event_id, i.reason, i.detail, i.legacy_row, i.run_id, i.recorded_at
  FROM outbox.bootstrap_items i
 WHERE i.classification = 'quarantined';
COMMENT ON VIEW outbox.bootstrap_quarantine IS
    'Legacy rows the bootstrap could not import, with their reason and the row as it was (SPEC R-BS-3). Read-only.';

-- Grants (SPEC R-SEC-1): nobody but the owner writes these tables; the auditor reads them;
-- outbox_retention has USAGE and EXECUTE on its functions only (granted in the files).
REVOKE ALL ON outbox.archive_runs, outbox.archive_run_skips, outbox.archived_events, outbox.archived_deliveries,
              outbox.archived_attempt_starts, outbox.archived_attempt_finishes, outbox.archived_quarantine,
              outbox.legal_holds, outbox.bootstrap_runs, outbox.bootstrap_items,
              outbox.event_source, outbox.bootstrap_quarantine FROM PUBLIC;
GRANT SELECT ON outbox.archive_runs, outbox.archive_run_skips, outbox.archived_events, outbox.archived_deliveries,
                outbox.archived_attempt_starts, outbox.archived_attempt_finishes, outbox.archived_quarantine,
                outbox.legal_holds, outbox.bootstrap_runs, outbox.bootstrap_items,
                outbox.event_source, outbox.bootstrap_quarantine
    TO outbox_auditor;

RESET ROLE;
