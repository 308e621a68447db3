-- Controlled recovery of quarantined deliveries (SPEC R-AK-10, §13, R-SEC-1: only the
-- original event is re-delivered, bound to a case, an impact preview, an idempotency key and an
-- audit row - no skip, no forced success, no payload edit, no arbitrary replay).
-- The role is created first, as the connecting user (roles are cluster-wide; the owner cannot
-- create roles); everything else runs as outbox_owner.
-- outbox_operator may call the recovery functions of R-AK-10 and nothing else (the grants are
-- in those functions' files); operators grant it to the login users who handle cases.
-- One NOLOGIN group role whose name is the template argument (a migration includes this file with
-- the role name as the template data; SPEC R-SEC-1). Roles are cluster-wide: created idempotently, tolerant of a parallel template
-- build creating the same role at the same moment (duplicate_object), as roles/create_roles.sql
-- does for the first six roles. Operators grant it to login users.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_operator') THEN
        BEGIN
            CREATE ROLE outbox_operator NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;


SET LOCAL ROLE outbox_owner;
GRANT USAGE ON SCHEMA outbox TO outbox_operator;

-- One quarantine row per quarantine: a delivery quarantined again after a recovery gets a new
-- row and the earlier one stays (with its acknowledged_at/case_id). The key becomes a
-- generated id (its order is the order of the quarantines); at most one quarantine row per
-- attempt, and at most one not yet acknowledged row per delivery.
ALTER TABLE outbox.outbox_quarantine DROP CONSTRAINT outbox_quarantine_pkey;
ALTER TABLE outbox.outbox_quarantine ADD COLUMN quarantine_id bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE outbox.outbox_quarantine ADD CONSTRAINT outbox_quarantine_pkey PRIMARY KEY (quarantine_id);
CREATE INDEX outbox_quarantine_by_delivery ON outbox.outbox_quarantine (destination, event_id, quarantine_id);
CREATE UNIQUE INDEX outbox_quarantine_one_open ON outbox.outbox_quarantine (destination, event_id)
    WHERE acknowledged_at IS NULL;
DROP INDEX outbox.outbox_quarantine_attempt;
CREATE UNIQUE INDEX outbox_quarantine_one_per_attempt ON outbox.outbox_quarantine (attempt_id);
COMMENT ON TABLE outbox.outbox_quarantine IS
    'One row per quarantine (SPEC R-AK-6, R-AK-10): append-only except acknowledged_at/case_id, each set once (by an operator taking the case up, or by redeliver_quarantined).';
-- set-once acknowledged_at/case_id; the comparison covers every column (quarantine_id included)
DROP FUNCTION outbox.tg_outbox_quarantine__append_only() CASCADE;
-- tg_outbox_quarantine__append_only: quarantine is a state, never a deletion (SPEC R-AK-6,
-- R-AK-10, R-SEC-3). One row per quarantine (a delivery quarantined again after a recovery gets
-- a new row; the earlier one stays). Rows are append-only except acknowledged_at and case_id,
-- which are set once (NULL -> a value, never changed afterwards): by an operator taking the case
-- up, or by outbox.redeliver_quarantined. Any other change (every other column, whatever columns
-- the table has), a second change of acknowledged_at/case_id, DELETE or TRUNCATE raises OB202,
-- for every role (the owner included).
CREATE FUNCTION outbox.tg_outbox_quarantine__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_rest outbox.outbox_quarantine;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        v_rest := NEW;
        v_rest.acknowledged_at := OLD.acknowledged_at;
        v_rest.case_id := OLD.case_id;
        IF v_rest IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'outbox.outbox_quarantine is append-only except acknowledged_at and case_id'
                USING ERRCODE = 'OB202',
                      DETAIL = pg_catalog.format('quarantine row %s/%s: only acknowledged_at and case_id may change',
                                                 OLD.destination, OLD.event_id);
        END IF;
        IF (OLD.acknowledged_at IS NOT NULL AND NEW.acknowledged_at IS DISTINCT FROM OLD.acknowledged_at)
           OR (OLD.case_id IS NOT NULL AND NEW.case_id IS DISTINCT FROM OLD.case_id) THEN
            RAISE EXCEPTION 'outbox.outbox_quarantine: acknowledged_at and case_id are set once'
                USING ERRCODE = 'OB202',
                      DETAIL = pg_catalog.format('quarantine row %s/%s already has acknowledged_at %s, case_id %s',
                                                 OLD.destination, OLD.event_id, OLD.acknowledged_at, OLD.case_id);
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'outbox.outbox_quarantine is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_quarantine is not allowed', TG_OP);
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_quarantine__append_only() IS
    'Trigger: outbox.outbox_quarantine rows are append-only except acknowledged_at/case_id, each set once; other changes, DELETE, TRUNCATE raise OB202 (SPEC R-AK-6, R-AK-10).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_quarantine__append_only() FROM PUBLIC;

CREATE TRIGGER tg_outbox_quarantine__append_only
    BEFORE UPDATE OR DELETE ON outbox.outbox_quarantine
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();
CREATE TRIGGER tg_outbox_quarantine__append_only_truncate
    BEFORE TRUNCATE ON outbox.outbox_quarantine
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();


-- The retry budget restarts at a recovery: max_attempts counts attempt_count -
-- recovery_attempt_base (0 until the first recovery; set to attempt_count by each recovery).
-- Adding the column with a constant default rewrites nothing; the CHECK scans the table once.
ALTER TABLE outbox.outbox_deliveries
    ADD COLUMN recovery_attempt_base integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT outbox_deliveries_recovery_attempt_base_check
        CHECK (recovery_attempt_base >= 0 AND recovery_attempt_base <= attempt_count);

-- The recovery audit: one immutable row per recovery (R-AK-10, R-SEC-3). recovered_txid is
-- stamped by the insert trigger; the deliveries' immutability trigger requires a row of the
-- current transaction for the delivery before it lets it leave quarantined.
-- No foreign keys on purpose: the only writer (redeliver_quarantined) reads the delivery and
-- the quarantine row it names under their row locks; an audit record must outlive any later
-- move of hot rows (retention); and a reference to outbox_quarantine would turn the
-- quarantine's TRUNCATE refusal (OB202, its trigger) into a foreign-key error.
CREATE TABLE outbox.outbox_recoveries (
    recovery_id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    idempotency_key        text NOT NULL UNIQUE
                           CHECK (length(idempotency_key) <= 128 AND idempotency_key ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$'),
    destination            text NOT NULL,
    event_id               uuid NOT NULL,
    case_id                text NOT NULL
                           CHECK (length(case_id) <= 128 AND case_id ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]*$'),
    reason                 text NOT NULL CHECK (length(reason) BETWEEN 1 AND 500 AND reason !~ '[[:cntrl:]]'),
    requested_by           text NOT NULL,
    quarantine_id          bigint NOT NULL,
    quarantine_reason      text NOT NULL REFERENCES outbox.error_codes (code),
    quarantined_at         timestamptz NOT NULL,
    before_status          text NOT NULL CHECK (before_status = 'quarantined'),
    before_attempt_count   integer NOT NULL CHECK (before_attempt_count >= 0),
    before_attempt_id      uuid,
    before_last_error_code text,
    after_status           text NOT NULL CHECK (after_status = 'pending'),
    after_available_at     timestamptz NOT NULL,
    recovered_at           timestamptz NOT NULL,
    recovered_txid         xid8 NOT NULL
);
CREATE INDEX outbox_recoveries_by_delivery ON outbox.outbox_recoveries (destination, event_id);
CREATE INDEX outbox_recoveries_by_quarantine ON outbox.outbox_recoveries (quarantine_id);
COMMENT ON TABLE outbox.outbox_recoveries IS
    'Controlled recoveries (SPEC R-AK-10): one immutable row per redeliver_quarantined - who (session user), which delivery, case, sanitized reason, idempotency key, state before and after, when.';
-- tg_outbox_recoveries__append_only: the recovery audit (SPEC R-AK-10, R-SEC-3) is append-only.
-- INSERT: recovered_txid is always set to the inserting transaction's id (pg_current_xact_id(),
--   the top-level id even inside a savepoint), whatever the statement supplied. The deliveries'
--   immutability trigger lets a delivery leave quarantined only when an audit row for it carries
--   the current transaction's id, so an audit row cannot be prepared in advance or reused later.
-- UPDATE, DELETE and TRUNCATE raise OB202 for every role, the owner included.
CREATE FUNCTION outbox.tg_outbox_recoveries__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.recovered_txid := pg_catalog.pg_current_xact_id();
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'outbox.outbox_recoveries is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_recoveries is not allowed: a recovery audit row never changes', TG_OP);
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_recoveries__append_only() IS
    'Trigger: outbox.outbox_recoveries is append-only (UPDATE/DELETE/TRUNCATE raise OB202); INSERT stamps recovered_txid with the current transaction id (SPEC R-AK-10, R-SEC-3).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_recoveries__append_only() FROM PUBLIC;

CREATE TRIGGER tg_outbox_recoveries__stamp
    BEFORE INSERT ON outbox.outbox_recoveries
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_recoveries__append_only();
CREATE TRIGGER tg_outbox_recoveries__append_only
    BEFORE UPDATE OR DELETE ON outbox.outbox_recoveries
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_recoveries__append_only();
CREATE TRIGGER tg_outbox_recoveries__append_only_truncate
    BEFORE TRUNCATE ON outbox.outbox_recoveries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_recoveries__append_only();


-- The deliveries' immutability trigger: the one way out of quarantine (re-created from its file).
-- (CASCADE drops exactly the triggers that use this function: immutable, no_delete, no_truncate)
DROP FUNCTION outbox.tg_outbox_deliveries__immutable() CASCADE;
-- Delivery immutability (SPEC R-SEC-3): the frozen columns of a delivery (what the delivery
-- set decided when the event was appended) never change, terminal states never change, rows are
-- never deleted. Lease/attempt/ack columns move only through the dispatch functions.
-- The one exception (SPEC R-AK-10): a quarantined delivery goes back to pending through
-- outbox.redeliver_quarantined, and only like this - status 'pending', a new available_at,
-- recovery_attempt_base := attempt_count, every other column unchanged - and only when the
-- same transaction wrote the recovery audit row for it (outbox.outbox_recoveries, stamped with
-- pg_current_xact_id() by its insert trigger, matching the attempt count and the new
-- available_at). No setting can stand in for that row, so a direct UPDATE (the owner's too)
-- raises OB202. The branch refers to outbox_recoveries and recovery_attempt_base, which the
-- recovery migration creates; before it, the branch fails (undefined object), i.e. closed.
CREATE FUNCTION outbox.tg_outbox_deliveries__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_expect outbox.outbox_deliveries;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (NEW.destination, NEW.event_id, NEW.delivery_set_version, NEW.consumer_name, NEW.expected_receipt_type,
            NEW.expected_receipt_schema_version, NEW.required_projection_name, NEW.required_projection_version,
            NEW.mandatory, NEW.aggregate_id, NEW.aggregate_revision, NEW.created_at)
           IS DISTINCT FROM
           (OLD.destination, OLD.event_id, OLD.delivery_set_version, OLD.consumer_name, OLD.expected_receipt_type,
            OLD.expected_receipt_schema_version, OLD.required_projection_name, OLD.required_projection_version,
            OLD.mandatory, OLD.aggregate_id, OLD.aggregate_revision, OLD.created_at) THEN
            RAISE EXCEPTION 'immutability violation: frozen delivery columns never change'
                USING ERRCODE = 'OB202', DETAIL = format('delivery %s/%s', OLD.destination, OLD.event_id);
        END IF;
        IF OLD.status = 'quarantined' AND NEW.status = 'pending' THEN
            v_expect := OLD;
            v_expect.status := 'pending';
            v_expect.available_at := NEW.available_at;
            v_expect.recovery_attempt_base := OLD.attempt_count;
            IF NEW IS NOT DISTINCT FROM v_expect
               AND EXISTS (SELECT 1 FROM outbox.outbox_recoveries AS r
                            WHERE r.destination = OLD.destination AND r.event_id = OLD.event_id
                              AND r.recovered_txid = pg_catalog.pg_current_xact_id()
                              AND r.before_attempt_count = OLD.attempt_count
                              AND r.after_available_at = NEW.available_at) THEN
                RETURN NEW;
            END IF;
            RAISE EXCEPTION 'immutability violation: a quarantined delivery leaves quarantine only through outbox.redeliver_quarantined'
                USING ERRCODE = 'OB202',
                      DETAIL = pg_catalog.format('delivery %s/%s: no recovery audit row of this transaction for this change',
                                                 OLD.destination, OLD.event_id),
                      HINT = 'call outbox.redeliver_quarantined(destination, event_id, case_id, reason, idempotency_key) as outbox_operator';
        END IF;
        IF OLD.status IN ('acknowledged', 'quarantined') AND NEW IS DISTINCT FROM OLD THEN
            RAISE EXCEPTION 'immutability violation: terminal deliveries never change'
                USING ERRCODE = 'OB202', DETAIL = format('delivery %s/%s is %s', OLD.destination, OLD.event_id, OLD.status);
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.outbox_deliveries is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'deliveries are never deleted; quarantine is a state';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_outbox_deliveries__immutable() FROM PUBLIC;

-- UPDATE: the WHEN clause (evaluated by the executor, no PL/pgSQL call) lets through every
-- update that keeps the frozen columns and does not touch a terminal row - the dispatch hot
-- path - and runs the function, which raises, only for a violation (P-4: no per-row function
-- call on claims and outcomes).
CREATE TRIGGER tg_outbox_deliveries__immutable BEFORE UPDATE ON outbox.outbox_deliveries
    FOR EACH ROW
    WHEN ((NEW.destination, NEW.event_id, NEW.delivery_set_version, NEW.consumer_name, NEW.expected_receipt_type,
           NEW.expected_receipt_schema_version, NEW.required_projection_name, NEW.required_projection_version,
           NEW.mandatory, NEW.aggregate_id, NEW.aggregate_revision, NEW.created_at)
          IS DISTINCT FROM
          (OLD.destination, OLD.event_id, OLD.delivery_set_version, OLD.consumer_name, OLD.expected_receipt_type,
           OLD.expected_receipt_schema_version, OLD.required_projection_name, OLD.required_projection_version,
           OLD.mandatory, OLD.aggregate_id, OLD.aggregate_revision, OLD.created_at)
          OR (OLD.status IN ('acknowledged', 'quarantined') AND NEW.* IS DISTINCT FROM OLD.*))
    EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();
CREATE TRIGGER tg_outbox_deliveries__no_delete BEFORE DELETE ON outbox.outbox_deliveries
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();
CREATE TRIGGER tg_outbox_deliveries__no_truncate BEFORE TRUNCATE ON outbox.outbox_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_deliveries__immutable();


-- Exhaustion and backoff count the attempts since the last recovery.
DROP FUNCTION outbox.retry_deliveries(json);
-- outbox.retry_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-5, R-AK-7, R-AK-9, R-AK-10, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many retryable outcomes in one call and one transaction. p_items: a JSON array (at most
--   1000) of {destination, eventId, attemptId, leaseToken, errorCode, errorRef?}, parsed once by
--   outbox._outcome_items. One row per item in input order: pending (back to pending after the
--   policy's backoff), quarantined (max attempts since the last recovery reached: retry_exhausted;
--   awaiting_revision never exhausts) or rejected with sqlstate and detail: 22023 (shape, unknown
--   or non-retryable code), OB001 (fencing; a delivery named twice). A rejected item changes
--   nothing. Set-based, no per-item function call on the success path (HP-1); plans are index
--   lookups (HP-3). Time: clock_timestamp() once per call.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable.
-- Caller: outbox_dispatcher (also through outbox.retry_delivery, a batch of one).
CREATE FUNCTION outbox.retry_deliveries(p_items json)
RETURNS TABLE (destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_ord     integer[];
    v_dest    text[];
    v_event   uuid[];
    v_attempt uuid[];
    v_token   uuid[];
    v_code    text[];
    v_ref     text[];
    v_state   text[];
    v_detail  text[];
    v_outcome text[];
BEGIN
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.error_code, p.error_ref, p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_ref, v_state, v_detail
      FROM outbox._outcome_items(p_items, 'retry_deliveries') AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);
    -- a destination without a policy row gets its default one (register_destination inserts it)
    PERFORM outbox._ensure_retry_policy(x.dest)
       FROM (SELECT DISTINCT d.destination AS dest
               FROM unnest(v_dest, v_event) AS u(dest, ev)
               JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev) AS x
      WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_retry_policies AS rp WHERE rp.destination = x.dest);

    -- judge: fencing, then exhaustion by the policy
    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord),
           pg_catalog.array_agg(j.outcome ORDER BY j.ord)
      INTO v_state, v_detail, v_outcome
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail,
                   CASE WHEN u.state IS NOT NULL OR f.problem IS NOT NULL THEN 'rejected'
                        WHEN d.attempt_count - d.recovery_attempt_base >= rp.max_attempts
                             AND u.code <> 'awaiting_revision' THEN 'quarantined'
                        ELSE 'pending' END AS outcome
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, code, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
              LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = u.dest
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
           ) AS j;

    -- pending: retryable finish, back to pending after the backoff
    WITH ok AS (
        SELECT u.dest, u.ev, u.att, u.tok, u.code, u.ref
          FROM unnest(v_dest, v_event, v_attempt, v_token, v_code, v_ref, v_outcome)
               AS u(dest, ev, att, tok, code, ref, outcome)
         WHERE u.outcome = 'pending'
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
        SELECT ok.att, v_now, 'retryable', 'retry_scheduled', ok.code, ok.ref FROM ok
        RETURNING attempt_id
    )
    UPDATE outbox.outbox_deliveries AS d
       SET status           = 'pending',
           available_at     = v_now + outbox._backoff_delay(rp, d.attempt_count - d.recovery_attempt_base),
           lease_owner      = NULL,
           lease_token      = NULL,
           lease_expires_at = NULL,
           last_error_code  = ok.code,
           last_error_ref   = ok.ref
      FROM ok
      JOIN outbox.outbox_retry_policies AS rp ON rp.destination = ok.dest
     WHERE d.destination = ok.dest AND d.event_id = ok.ev
       AND d.status = 'leased' AND d.current_attempt_id = ok.att AND d.lease_token = ok.tok;

    -- exhausted: quarantined as retry_exhausted (the finish keeps the consumer's code and ref)
    PERFORM outbox._quarantine_write(pg_catalog.array_agg(u.dest), pg_catalog.array_agg(u.ev), pg_catalog.array_agg(u.att),
                                     'retryable', pg_catalog.array_agg('retry_exhausted'::text),
                                     pg_catalog.array_agg(u.code), pg_catalog.array_agg(u.ref), v_now)
       FROM unnest(v_dest, v_event, v_attempt, v_code, v_ref, v_outcome) AS u(dest, ev, att, code, ref, outcome)
      WHERE u.outcome = 'quarantined'
     HAVING pg_catalog.count(*) > 0;

    RETURN QUERY
    SELECT u.dest, u.ev, u.att, u.outcome, u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_outcome, v_state, v_detail)
           AS u(ord, dest, ev, att, outcome, state, detail)
     ORDER BY u.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.retry_deliveries(json) IS
    'Record many retryable outcomes in one transaction, each fenced like retry_delivery; one row per item in input order: pending | quarantined (retry_exhausted) | rejected (sqlstate, detail). awaiting_revision never exhausts. SPEC R-AK-5, R-AK-9.';
REVOKE ALL ON FUNCTION outbox.retry_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retry_deliveries(json) TO outbox_dispatcher;

DROP FUNCTION outbox._dispatch_recover(text[], integer, timestamptz);
-- outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamptz)
-- RETURNS integer  (private, SPEC R-CL-2, R-AK-5, R-AK-8, R-AK-10)
-- Purpose: lease-expiry recovery in ONE statement. For up to p_max_rows leased deliveries whose
--   lease expired at p_now (all destinations when p_destinations is NULL): append the finish
--   lease_expired_unknown to the open attempt and make the delivery pending again, or quarantine
--   it (retry_exhausted) when that was its last allowed attempt. Returns how many attempts it closed.
-- Locking: FOR UPDATE SKIP LOCKED on the delivery rows (never waits for a worker finishing its row).
-- SQLSTATEs: none of its own.
-- Design notes (fencing race, index): docs/performance-notes.md#outbox_dispatch_recover
-- Caller: outbox.recover_expired_leases and outbox.claim_deliveries; granted to nobody.
CREATE FUNCTION outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_count       integer;
    v_quarantined integer;
BEGIN
    -- expired on the last allowed attempt: quarantined (set-based, the one quarantine write)
    WITH exhausted AS (
        SELECT d.destination, d.event_id, d.current_attempt_id
          FROM outbox.outbox_deliveries AS d
          JOIN outbox.outbox_retry_policies AS p ON p.destination = d.destination
         WHERE d.status = 'leased'
           AND d.lease_expires_at <= p_now
           AND (p_destinations IS NULL OR d.destination = ANY (p_destinations))
           AND d.attempt_count - d.recovery_attempt_base >= p.max_attempts
         ORDER BY d.lease_expires_at
         LIMIT p_max_rows
           FOR UPDATE OF d SKIP LOCKED
    )
    SELECT coalesce(outbox._quarantine_write(pg_catalog.array_agg(x.destination), pg_catalog.array_agg(x.event_id),
                                             pg_catalog.array_agg(x.current_attempt_id), 'lease_expired_unknown',
                                             pg_catalog.array_agg('retry_exhausted'::text),
                                             pg_catalog.array_agg('retry_exhausted'::text),
                                             pg_catalog.array_agg('lease expired on the last allowed attempt'::text), p_now), 0)
      INTO v_quarantined
      FROM exhausted AS x
    HAVING pg_catalog.count(*) > 0;
    v_quarantined := coalesce(v_quarantined, 0);

    WITH expired AS (
        SELECT d.ctid AS row_ctid, d.current_attempt_id
          FROM outbox.outbox_deliveries AS d
         WHERE d.status = 'leased'
           AND d.lease_expires_at <= p_now
           AND (p_destinations IS NULL OR d.destination = ANY (p_destinations))
         ORDER BY d.lease_expires_at
         LIMIT p_max_rows
           FOR UPDATE SKIP LOCKED
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
        SELECT x.current_attempt_id, p_now, 'lease_expired_unknown', 'reclaimable', NULL, NULL
          FROM expired AS x
         WHERE x.current_attempt_id IS NOT NULL
        ON CONFLICT (attempt_id) DO NOTHING
        RETURNING attempt_id
    ), moved AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status           = 'pending',
               available_at     = p_now,
               lease_owner      = NULL,
               lease_token      = NULL,
               lease_expires_at = NULL
         WHERE d.ctid = ANY (ARRAY(SELECT x.row_ctid FROM expired AS x))
           AND d.status = 'leased'
        RETURNING d.event_id
    )
    SELECT pg_catalog.count(*)::integer INTO v_count FROM moved;
    RETURN v_count + v_quarantined;
END
$fn$;

COMMENT ON FUNCTION outbox._dispatch_recover(text[], integer, timestamptz) IS
    'Private: close expired leases as lease_expired_unknown and make their deliveries pending again, one bounded SKIP LOCKED statement (SPEC R-CL-2).';
REVOKE ALL ON FUNCTION outbox._dispatch_recover(text[], integer, timestamptz) FROM PUBLIC;


-- The recovery API (SPEC §13): preview (operator, auditor), redeliver (operator only), and the
-- per destination/reason counts for the metric (dispatcher, auditor).
-- outbox.preview_redelivery(p_destination text, p_event_id uuid)
-- RETURNS TABLE (destination text, event_id uuid, event_type text, consumer_name text,
--                status text, attempt_count integer, quarantine_reason text,
--                quarantined_at timestamptz, published boolean, would_change text)
-- (public, SPEC R-AK-10, §13)
-- Purpose: the impact preview of a controlled recovery: exactly one row saying what
--   outbox.redeliver_quarantined would do to this delivery, without changing anything; would_change
--   in plain language, or "nothing" with the reason it would refuse (OB602). Never payload content.
-- Locking: none (plain MVCC reads; redeliver_quarantined re-checks under the row lock).
-- SQLSTATEs: 22023 a NULL argument or no delivery for (destination, event_id).
-- Design notes: docs/operations.md#outboxpreview_redelivery
-- Callers: outbox_operator (before a recovery), outbox_auditor (read-only).
CREATE FUNCTION outbox.preview_redelivery(p_destination text, p_event_id uuid)
RETURNS TABLE (destination text, event_id uuid, event_type text, consumer_name text, status text,
               attempt_count integer, quarantine_reason text, quarantined_at timestamptz,
               published boolean, would_change text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_d          outbox.outbox_deliveries;
    v_type       text;
    v_schema     text;
    v_q          outbox.outbox_quarantine;
    v_published  timestamptz;
    v_open       integer;
    v_total      integer;
    v_max        integer;
    v_recoveries integer;
    v_change     text;
BEGIN
    IF p_destination IS NULL OR p_event_id IS NULL THEN
        RAISE EXCEPTION 'preview_redelivery: destination and event_id are required'
            USING ERRCODE = '22023', DETAIL = 'pass the destination and the event id of one delivery';
    END IF;
    SELECT d.* INTO v_d
      FROM outbox.outbox_deliveries AS d
     WHERE d.destination = p_destination AND d.event_id = p_event_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'preview_redelivery: no such delivery'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('no delivery %s/%s', pg_catalog.left(p_destination, 200), p_event_id);
    END IF;
    SELECT e.event_type, e.schema_version INTO v_type, v_schema
      FROM outbox.outbox_events AS e WHERE e.event_id = p_event_id;
    SELECT p.published_at INTO v_published
      FROM outbox.outbox_publications AS p WHERE p.event_id = p_event_id;

    IF v_d.status <> 'quarantined' THEN
        v_change := pg_catalog.format(
            'nothing: the delivery is %s, not quarantined; outbox.redeliver_quarantined refuses it (OB602)%s',
            v_d.status,
            CASE v_d.status
                WHEN 'pending' THEN ' - it is already waiting for its next attempt'
                WHEN 'leased' THEN ' - an attempt is in flight'
                WHEN 'acknowledged' THEN ' - the consumer acknowledged it'
                ELSE '' END);
    ELSE
        SELECT q.* INTO v_q
          FROM outbox.outbox_quarantine AS q
         WHERE q.destination = p_destination AND q.event_id = p_event_id
         ORDER BY q.quarantine_id DESC
         LIMIT 1;
        SELECT pg_catalog.count(*) FILTER (WHERE d.status <> 'acknowledged'), pg_catalog.count(*)
          INTO v_open, v_total
          FROM outbox.outbox_deliveries AS d
         WHERE d.event_id = p_event_id AND d.mandatory;
        SELECT rp.max_attempts INTO v_max
          FROM outbox.outbox_retry_policies AS rp WHERE rp.destination = p_destination;
        SELECT pg_catalog.count(*) INTO v_recoveries
          FROM outbox.outbox_recoveries AS r
         WHERE r.destination = p_destination AND r.event_id = p_event_id;
        v_change := pg_catalog.format(
            're-deliver the original event %s (%s, schema %s, envelope sha256 %s, unchanged) to %s '
            '(consumer %s, expected receipt %s v%s%s) as attempt %s: quarantined -> pending, due now. '
            'The retry budget restarts: %s more attempts before it is quarantined again (retry_exhausted). '
            'Quarantine row %s (reason %s, since %s) gets acknowledged_at and the case id; one audit row is written%s. '
            'Publication: %s',
            p_event_id, v_type, v_schema, v_q.event_envelope_sha256, p_destination,
            v_d.consumer_name, v_d.expected_receipt_type, v_d.expected_receipt_schema_version,
            CASE WHEN v_d.required_projection_name IS NOT NULL
                 THEN pg_catalog.format(', projection %s v%s', v_d.required_projection_name, v_d.required_projection_version)
                 ELSE '' END,
            v_d.attempt_count + 1,
            coalesce(v_max::text, 'the policy''s max_attempts'),
            v_q.quarantine_id, v_q.reason, v_q.quarantined_at,
            CASE WHEN v_recoveries > 0 THEN pg_catalog.format(' (re-delivered %s time(s) before)', v_recoveries) ELSE '' END,
            CASE WHEN v_published IS NOT NULL
                 THEN pg_catalog.format('already published at %s; stays so with that time', v_published)
                 WHEN v_open = 1
                 THEN 'open; this is the event''s last unacknowledged delivery, so the event is published when it is acknowledged'
                 ELSE pg_catalog.format('open; %s of the event''s %s deliveries are not acknowledged', v_open, v_total) END);
    END IF;

    RETURN QUERY
    SELECT v_d.destination, v_d.event_id, v_type, v_d.consumer_name, v_d.status, v_d.attempt_count,
           v_q.reason, v_q.quarantined_at, v_published IS NOT NULL, v_change;
END
$fn$;

COMMENT ON FUNCTION outbox.preview_redelivery(text, uuid) IS
    'Impact preview of a controlled recovery: one row - event, frozen consumer, status, attempts, current quarantine reason/time, published, would_change in plain language. Changes nothing. 22023 no such delivery. SPEC R-AK-10. Callers: outbox_operator, outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.preview_redelivery(text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.preview_redelivery(text, uuid) TO outbox_operator, outbox_auditor;

-- outbox.redeliver_quarantined(p_destination text, p_event_id uuid, p_case_id text, p_reason text,
--                              p_idempotency_key text) RETURNS TABLE (recovery_id uuid, status text)
-- (public, SPEC R-AK-10, §13: controlled manual recovery)
-- Purpose: the one way out of quarantine. Moves ONE quarantined delivery back to pending, due at
--   once: the same event, digest and frozen member; attempt history continues, the retry budget
--   restarts; the quarantine row gets the case; one immutable audit row in outbox.outbox_recoveries.
--   No skip, no forced success, no payload edit. Idempotent per key.
-- Locking: the delivery row FOR UPDATE, then its latest quarantine row FOR UPDATE.
-- SQLSTATEs: 22023 an argument is NULL or not a valid literal / reason, or the quarantine row is
--   already bound to another case; OB601 the key was used for another request; OB602 the
--   delivery does not exist or is not quarantined (DETAIL names its status).
-- Design notes (idempotency, arguments, audit row): docs/operations.md#outboxredeliver_quarantined
-- Caller: outbox_operator only.
CREATE FUNCTION outbox.redeliver_quarantined(p_destination text, p_event_id uuid, p_case_id text,
                                             p_reason text, p_idempotency_key text)
RETURNS TABLE (recovery_id uuid, status text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_reason text;
    v_prior  outbox.outbox_recoveries;
    v_d      outbox.outbox_deliveries;
    v_q      outbox.outbox_quarantine;
    v_now    timestamptz;
    v_id     uuid;
    v_pass   integer;
BEGIN
    -- arguments: bounded before any pattern is applied (R-SEC-5)
    IF p_destination IS NULL OR pg_catalog.length(p_destination) > 200 OR p_event_id IS NULL THEN
        RAISE EXCEPTION 'redeliver_quarantined: destination and event_id are required'
            USING ERRCODE = '22023', DETAIL = 'pass the destination (at most 200 characters) and the event id of one delivery';
    END IF;
    IF p_case_id IS NULL OR pg_catalog.length(p_case_id) > 128 OR p_case_id !~ '^[A-Za-z0-9][A-Za-z0-9._:/-]*$' THEN
        RAISE EXCEPTION 'redeliver_quarantined: case_id is not a valid literal'
            USING ERRCODE = '22023', DETAIL = 'case_id: 1-128 characters of [A-Za-z0-9._:/-], starting with a letter or digit';
    END IF;
    IF p_idempotency_key IS NULL OR pg_catalog.length(p_idempotency_key) > 128
       OR p_idempotency_key !~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$' THEN
        RAISE EXCEPTION 'redeliver_quarantined: idempotency_key is not a valid literal'
            USING ERRCODE = '22023', DETAIL = 'idempotency_key: 1-128 characters of [A-Za-z0-9._:-], starting with a letter or digit';
    END IF;
    IF p_reason IS NULL OR pg_catalog.length(p_reason) > 500 THEN
        RAISE EXCEPTION 'redeliver_quarantined: reason is required, at most 500 characters'
            USING ERRCODE = '22023', DETAIL = 'reason: free text for people (what was fixed, why it is safe), no payload content';
    END IF;
    v_reason := nullif(pg_catalog.btrim(pg_catalog.regexp_replace(
                    pg_catalog.regexp_replace(p_reason, '[[:cntrl:]]', ' ', 'g'), '\s+', ' ', 'g')), '');
    IF v_reason IS NULL THEN
        RAISE EXCEPTION 'redeliver_quarantined: reason is empty'
            USING ERRCODE = '22023', DETAIL = 'reason: free text for people (what was fixed, why it is safe), no payload content';
    END IF;

    -- idempotency, before the state: the first pass before the row lock, the second after it
    -- (a call with the same key may have committed while this one waited for the lock)
    FOR v_pass IN 1..2 LOOP
        SELECT r.* INTO v_prior FROM outbox.outbox_recoveries AS r WHERE r.idempotency_key = p_idempotency_key;
        IF FOUND THEN
            IF (v_prior.destination, v_prior.event_id, v_prior.case_id, v_prior.reason)
               IS DISTINCT FROM (p_destination, p_event_id, p_case_id, v_reason) THEN
                RAISE EXCEPTION 'recovery idempotency key already used for a different request'
                    USING ERRCODE = 'OB601',
                          DETAIL = pg_catalog.format('idempotency key %s was used by recovery %s (delivery %s/%s, case %s) at %s',
                                                     p_idempotency_key, v_prior.recovery_id, v_prior.destination,
                                                     v_prior.event_id, v_prior.case_id, v_prior.recovered_at),
                          HINT = 'use a new key for a new request; repeat a request only with exactly its arguments';
            END IF;
            RETURN QUERY SELECT v_prior.recovery_id, v_prior.after_status;
            RETURN;
        END IF;
        EXIT WHEN v_pass = 2;
        SELECT d.* INTO v_d
          FROM outbox.outbox_deliveries AS d
         WHERE d.destination = p_destination AND d.event_id = p_event_id
           FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'recovery refused: the delivery is not quarantined'
                USING ERRCODE = 'OB602',
                      DETAIL = pg_catalog.format('no delivery %s/%s', p_destination, p_event_id);
        END IF;
    END LOOP;

    IF v_d.status <> 'quarantined' THEN
        RAISE EXCEPTION 'recovery refused: the delivery is not quarantined'
            USING ERRCODE = 'OB602',
                  DETAIL = pg_catalog.format('delivery %s/%s is %s: only a quarantined delivery can be re-delivered%s',
                                             p_destination, p_event_id, v_d.status,
                                             CASE v_d.status
                                                 WHEN 'pending' THEN ' (it is already waiting for its next attempt)'
                                                 WHEN 'leased' THEN ' (an attempt is in flight)'
                                                 WHEN 'acknowledged' THEN ' (the consumer acknowledged it; nothing to recover)'
                                                 ELSE '' END);
    END IF;
    SELECT q.* INTO v_q
      FROM outbox.outbox_quarantine AS q
     WHERE q.destination = p_destination AND q.event_id = p_event_id
     ORDER BY q.quarantine_id DESC
     LIMIT 1
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'recovery refused: the delivery is not quarantined'
            USING ERRCODE = 'OB602',
                  DETAIL = pg_catalog.format('delivery %s/%s is quarantined but has no quarantine row', p_destination, p_event_id);
    END IF;
    IF v_q.case_id IS NOT NULL AND v_q.case_id <> p_case_id THEN
        RAISE EXCEPTION 'redeliver_quarantined: the quarantine is bound to another case'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('quarantine row %s of %s/%s belongs to case %s', v_q.quarantine_id,
                                             p_destination, p_event_id, v_q.case_id);
    END IF;

    v_now := pg_catalog.clock_timestamp();
    INSERT INTO outbox.outbox_recoveries
           (idempotency_key, destination, event_id, case_id, reason, requested_by,
            quarantine_id, quarantine_reason, quarantined_at,
            before_status, before_attempt_count, before_attempt_id, before_last_error_code,
            after_status, after_available_at, recovered_at)
    VALUES (p_idempotency_key, p_destination, p_event_id, p_case_id, v_reason, session_user,
            v_q.quarantine_id, v_q.reason, v_q.quarantined_at,
            v_d.status, v_d.attempt_count, v_d.current_attempt_id, v_d.last_error_code,
            'pending', v_now, v_now)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING recovery_id INTO v_id;
    IF v_id IS NULL THEN
        -- the key was taken meanwhile by a recovery of another delivery (this one is locked)
        SELECT r.* INTO v_prior FROM outbox.outbox_recoveries AS r WHERE r.idempotency_key = p_idempotency_key;
        RAISE EXCEPTION 'recovery idempotency key already used for a different request'
            USING ERRCODE = 'OB601',
                  DETAIL = pg_catalog.format('idempotency key %s was used by recovery %s (delivery %s/%s, case %s) at %s',
                                             p_idempotency_key, v_prior.recovery_id, v_prior.destination,
                                             v_prior.event_id, v_prior.case_id, v_prior.recovered_at);
    END IF;

    UPDATE outbox.outbox_quarantine AS q
       SET acknowledged_at = coalesce(q.acknowledged_at, v_now),
           case_id         = coalesce(q.case_id, p_case_id)
     WHERE q.quarantine_id = v_q.quarantine_id
       AND (q.acknowledged_at IS NULL OR q.case_id IS NULL);
    UPDATE outbox.outbox_deliveries AS d
       SET status                = 'pending',
           available_at          = v_now,
           recovery_attempt_base = d.attempt_count
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       AND d.status = 'quarantined';
    -- wake the dispatchers of this destination (as append_events does)
    PERFORM pg_catalog.pg_notify('outbox_delivery', p_destination);

    RETURN QUERY SELECT v_id, 'pending'::text;
END
$fn$;

COMMENT ON FUNCTION outbox.redeliver_quarantined(text, uuid, text, text, text) IS
    'Controlled recovery: one quarantined delivery back to pending (same event, digest, frozen member; attempts continue; budget restarts; due now), quarantine row gets acknowledged_at/case_id, one immutable audit row; idempotent per key (OB601 other request), OB602 not quarantined. SPEC R-AK-10. Caller: outbox_operator.';
REVOKE ALL ON FUNCTION outbox.redeliver_quarantined(text, uuid, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.redeliver_quarantined(text, uuid, text, text, text) TO outbox_operator;

-- outbox.redelivery_stats() RETURNS TABLE (destination text, reason text, redeliveries bigint)
-- (public, SPEC R-AK-10, R-DP-4)
-- Purpose: controlled recoveries so far, per destination and quarantine reason (the reason code
--   of the quarantine that was recovered - a closed list, low cardinality - never the operator's
--   free text), from the recovery audit outbox.outbox_recoveries. The dispatcher exposes it as
--   pgoutbox_redeliveries_total{destination,reason}; the counts only grow (the audit is
--   append-only).
-- Cost: one aggregate over the audit table, which grows by one row per manual recovery.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: none of its own.
-- Callers: outbox_dispatcher (metrics), outbox_auditor.
CREATE FUNCTION outbox.redelivery_stats()
RETURNS TABLE (destination text, reason text, redeliveries bigint)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT r.destination, r.quarantine_reason, pg_catalog.count(*)
      FROM outbox.outbox_recoveries AS r
     GROUP BY r.destination, r.quarantine_reason
     ORDER BY r.destination, r.quarantine_reason
$fn$;

COMMENT ON FUNCTION outbox.redelivery_stats() IS
    'Controlled recoveries per destination and quarantine reason code, from the recovery audit (metric pgoutbox_redeliveries_total). SPEC R-AK-10. Callers: outbox_dispatcher, outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.redelivery_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.redelivery_stats() TO outbox_dispatcher, outbox_auditor;


-- Deliveries quarantined right now, one row each with its current (latest) quarantine row:
-- what `outboxctl quarantine list` shows. Driven by outbox_quarantine (small by design), not by
-- a scan of the deliveries.
CREATE VIEW outbox.open_quarantines AS
SELECT q.destination,
       q.event_id,
       e.event_type,
       e.schema_version,
       d.consumer_name,
       q.reason,
       d.last_error_code,
       d.attempt_count,
       q.quarantined_at,
       q.acknowledged_at,
       q.case_id,
       (SELECT count(*) FROM outbox.outbox_recoveries AS r
         WHERE r.destination = q.destination AND r.event_id = q.event_id) AS recoveries
FROM outbox.outbox_quarantine AS q
JOIN outbox.outbox_deliveries AS d ON d.destination = q.destination AND d.event_id = q.event_id
JOIN outbox.outbox_events AS e ON e.event_id = q.event_id
WHERE d.status = 'quarantined'
  AND NOT EXISTS (SELECT 1 FROM outbox.outbox_quarantine AS l
                   WHERE l.destination = q.destination AND l.event_id = q.event_id
                     AND l.quarantine_id > q.quarantine_id)
ORDER BY q.quarantined_at DESC, q.destination, q.event_id;
COMMENT ON VIEW outbox.open_quarantines IS
    'Deliveries quarantined now, with their current quarantine (reason, time, case) and earlier recoveries, newest first (outboxctl quarantine list). Read-only. SPEC R-AK-10.';
REVOKE ALL ON outbox.open_quarantines FROM PUBLIC;
GRANT SELECT ON outbox.open_quarantines, outbox.outbox_recoveries TO outbox_auditor;

RESET ROLE;
