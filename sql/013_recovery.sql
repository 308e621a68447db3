-- Controlled recovery of quarantined deliveries (SPEC R-AK-10, §13, R-SEC-1: only the
-- original event is re-delivered, bound to a case, an impact preview, an idempotency key and an
-- audit row - no skip, no forced success, no payload edit, no arbitrary replay).
-- The role is created first, as the connecting user (roles are cluster-wide; the owner cannot
-- create roles); everything else runs as outbox_owner.
-- outbox_operator may call the recovery functions of R-AK-10 and nothing else (the grants are
-- in those functions' files); operators grant it to the login users who handle cases.
{{ template "roles/create_group_role.sql" "outbox_operator" }}

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
{{ template "triggers/outbox_quarantine__append_only.sql" . }}

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
{{ template "triggers/outbox_recoveries__append_only.sql" . }}

-- The deliveries' immutability trigger: the one way out of quarantine (re-created from its file).
-- (CASCADE drops exactly the triggers that use this function: immutable, no_delete, no_truncate)
DROP FUNCTION outbox.tg_outbox_deliveries__immutable() CASCADE;
{{ template "triggers/outbox_deliveries__immutable.sql" . }}

-- Exhaustion and backoff count the attempts since the last recovery.
DROP FUNCTION outbox.retry_deliveries(json);
{{ template "functions/retry_deliveries.sql" . }}
DROP FUNCTION outbox._dispatch_recover(text[], integer, timestamptz);
{{ template "functions/_dispatch_recover.sql" . }}

-- The recovery API (SPEC §13): preview (operator, auditor), redeliver (operator only), and the
-- per destination/reason counts for the metric (dispatcher, auditor).
{{ template "functions/preview_redelivery.sql" . }}
{{ template "functions/redeliver_quarantined.sql" . }}
{{ template "functions/redelivery_stats.sql" . }}

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
