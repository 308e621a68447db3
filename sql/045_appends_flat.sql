-- Appends flat in a transaction of any size (issue 35 item 6; SPEC §12a P-6, HP-1; R-AP-5).
-- The cost of an append grew with what its transaction had appended before: 5,000 single
-- outbox.append_event calls in one transaction took 4.0 ms each, 16,000 took 9.7 ms each. Two
-- parts of the delivery-set proof's bookkeeping (021) were linear in the transaction's earlier
-- INSERT statements, so a backfill in one transaction was quadratic:
--  * each statement-level recording trigger (tg_outbox_events__delivery_set_complete,
--    tg_outbox_deliveries__delivery_set_member) read every row of outbox.outbox_append_proofs its
--    transaction had recorded, and unnested their ids, to avoid recording an id twice;
--  * every recorded row queued its own deferred proof trigger: at COMMIT the first firing proved
--    and deleted all rows, and each of the N - 1 others probed the index over N rows the same
--    transaction had deleted (not removable while it runs).
-- Now a recording trigger inserts its row without reading the others (an id recorded twice is
-- proven once: the proof takes the DISTINCT ids), and marks with the new column queues_proof
-- whether its row is the transaction's first (one index probe: NOT EXISTS stops at the first row
-- of the transaction). The constraint trigger is queued only for that row
-- (WHEN (new.queues_proof)): one firing per transaction proves every event the transaction
-- recorded, with the same statement and the same OB104 as before. After SET CONSTRAINTS ...
-- IMMEDIATE has proven and deleted the rows so far, the next statement's row is a first one
-- again and queues the proof again; a row recorded in a rolled-back savepoint goes with its queued
-- trigger, and the next statement's row is then a first one.
-- Locks: ACCESS EXCLUSIVE on outbox.outbox_append_proofs (ADD COLUMN with a constant default, no
-- rewrite; the table holds rows of running transactions only, so the migration waits for running
-- appends to end). No backfill.
SET LOCAL ROLE outbox_owner;

ALTER TABLE outbox.outbox_append_proofs ADD COLUMN queues_proof boolean NOT NULL DEFAULT false;

-- The delivery-set proof of R-AP-5, part 1 (part 2: outbox.tg_outbox_append_proofs__check): every
-- INSERT statement on outbox.outbox_events or outbox.outbox_deliveries - append_events, the
-- bootstrap, or the owner (or a superuser) writing the tables directly - records the event ids it
-- touched as ONE row of outbox.outbox_append_proofs, from its transition table. The first such row
-- of a transaction (queues_proof) queues the deferred constraint trigger, which proves at COMMIT that each recorded event has exactly one delivery
-- per mandatory member of its frozen delivery set (no missing, no extra rows). Statement-level:
-- a constant number of trigger calls per statement, whatever the number of rows (SPEC §12a
-- HP-1); the row-level deferred triggers they replace fired once per inserted row.
-- SECURITY DEFINER: the inserting role (outbox_owner inside append_events, or a superuser) may
-- differ from the owner of outbox.outbox_append_proofs.
-- Rule 3 of docs/migrations.md: the recording table only exists from the hot-path append
-- migration on; the trigger functions name it (PL/pgSQL binds it at the first call), and no
-- migration inserts events or deliveries before that migration runs.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_events__delivery_set_complete()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
    -- Constant work per statement, whatever the transaction appended before (issue 35 item 6):
    -- no look at the ids earlier rows recorded (an id recorded twice is proven once: the proof
    -- takes the DISTINCT ids), and only the transaction's first row is marked to queue the
    -- deferred proof (one index probe that stops at the first row of this transaction).
    INSERT INTO outbox.outbox_append_proofs (event_ids, queues_proof)
    SELECT pg_catalog.array_agg(n.event_id),
           NOT EXISTS (SELECT 1 FROM outbox.outbox_append_proofs p WHERE p.xact = pg_catalog.pg_current_xact_id())
      FROM new_events AS n
    HAVING pg_catalog.count(*) > 0;
    RETURN NULL;
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_outbox_events__delivery_set_complete() FROM PUBLIC;

-- The delivery-set proof of R-AP-5, part 1 (part 2: outbox.tg_outbox_append_proofs__check): every
-- INSERT statement on outbox.outbox_events or outbox.outbox_deliveries - append_events, the
-- bootstrap, or the owner (or a superuser) writing the tables directly - records the event ids it
-- touched as ONE row of outbox.outbox_append_proofs, from its transition table. The first such row
-- of a transaction (queues_proof) queues the deferred constraint trigger, which proves at COMMIT that each recorded event has exactly one delivery
-- per mandatory member of its frozen delivery set (no missing, no extra rows). Statement-level:
-- a constant number of trigger calls per statement, whatever the number of rows (SPEC §12a
-- HP-1); the row-level deferred triggers they replace fired once per inserted row.
-- SECURITY DEFINER: the inserting role (outbox_owner inside append_events, or a superuser) may
-- differ from the owner of outbox.outbox_append_proofs.
-- Rule 3 of docs/migrations.md: the recording table only exists from the hot-path append
-- migration on; the trigger functions name it (PL/pgSQL binds it at the first call), and no
-- migration inserts events or deliveries before that migration runs.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_deliveries__delivery_set_member()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
    -- (constant work per statement: see outbox.tg_outbox_events__delivery_set_complete)
    INSERT INTO outbox.outbox_append_proofs (event_ids, queues_proof)
    SELECT pg_catalog.array_agg(DISTINCT n.event_id),
           NOT EXISTS (SELECT 1 FROM outbox.outbox_append_proofs p WHERE p.xact = pg_catalog.pg_current_xact_id())
      FROM new_deliveries AS n
    HAVING pg_catalog.count(*) > 0;
    RETURN NULL;
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_outbox_deliveries__delivery_set_member() FROM PUBLIC;

-- The delivery-set proof of R-AP-5, part 2: the deferred end-of-transaction anti-join. Each row of
-- outbox.outbox_append_proofs (one per INSERT statement on the events or deliveries, see
-- outbox.tg_outbox_events__delivery_set_complete) that is its transaction's first (queues_proof)
-- queues this DEFERRABLE INITIALLY DEFERRED constraint trigger (WHEN (NEW.queues_proof)); at
-- COMMIT it takes every row its transaction recorded and proves all their events in ONE
-- set-based statement. One firing per transaction, not one per statement: N firings each probing
-- the index over the N rows the first one deleted were quadratic in the appends of a
-- transaction (issue 35 item 6). After SET CONSTRAINTS ... IMMEDIATE has proven the rows so far,
-- the next statement's row is again a first one and queues the proof again. Per event: exactly one
-- delivery per mandatory member of its frozen delivery set, each carrying the member's frozen
-- fields; no other delivery; the event row exists. A violation raises OB104 and aborts the whole
-- business transaction (the detail names the first event by id).
-- SECURITY DEFINER: deferred triggers fire as the committing role, which cannot read these tables.
-- Design notes (plan settings, HP-3, HP-4): docs/performance-notes.md#outboxtg_outbox_append_proofs__check
CREATE OR REPLACE FUNCTION outbox.tg_outbox_append_proofs__check()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    v_ids     uuid[];
    v_event   uuid;
    v_missing bigint;
    v_extra   bigint;
BEGIN
    WITH taken AS (
        DELETE FROM outbox.outbox_append_proofs p WHERE p.xact = NEW.xact RETURNING p.event_ids
    )
    SELECT pg_catalog.array_agg(DISTINCT u.event_id) INTO v_ids
      FROM taken CROSS JOIN LATERAL pg_catalog.unnest(taken.event_ids) AS u(event_id);
    IF v_ids IS NULL THEN
        RETURN NULL; -- already proven by an earlier firing of this transaction
    END IF;

    WITH ids AS (
        SELECT u.event_id FROM pg_catalog.unnest(v_ids) AS u(event_id)
    ), ev AS (
        SELECT e.event_id, e.delivery_set_version, e.delivery_set_definition_digest, e.event_type, e.schema_version
          FROM ids JOIN outbox.outbox_events e ON e.event_id = ids.event_id
    ), m AS (
        -- what each event must have
        SELECT ev.event_id, mm.destination, mm.consumer_name, mm.expected_receipt_type,
               mm.expected_receipt_schema_version, mm.projection_name, mm.projection_version
          FROM ev
          JOIN outbox.delivery_set_members mm
            ON mm.delivery_set_version = ev.delivery_set_version AND mm.event_type = ev.event_type
           AND mm.event_schema_version = ev.schema_version AND mm.definition_digest = ev.delivery_set_definition_digest
           AND mm.mandatory
    ), d AS (
        -- what each event has
        SELECT dd.event_id, dd.destination, dd.consumer_name, dd.expected_receipt_type,
               dd.expected_receipt_schema_version, dd.required_projection_name, dd.required_projection_version,
               (dd.mandatory AND dd.delivery_set_version = ev.delivery_set_version) AS in_set
          FROM ids
          JOIN outbox.outbox_deliveries dd ON dd.event_id = ids.event_id
          LEFT JOIN ev ON ev.event_id = dd.event_id
    ), problems AS (
        SELECT x.event_id, 1 AS missing, 0 AS extra
          FROM (SELECT m.* FROM m
                EXCEPT ALL
                SELECT d.event_id, d.destination, d.consumer_name, d.expected_receipt_type, d.expected_receipt_schema_version,
                       d.required_projection_name, d.required_projection_version FROM d WHERE d.in_set) AS x
        UNION ALL
        SELECT y.event_id, 0, 1
          FROM (SELECT d.event_id, d.destination, d.consumer_name, d.expected_receipt_type, d.expected_receipt_schema_version,
                       d.required_projection_name, d.required_projection_version FROM d WHERE d.in_set
                EXCEPT ALL
                SELECT m.* FROM m) AS y
        UNION ALL
        SELECT d.event_id, 0, 1 FROM d WHERE d.in_set IS NOT TRUE
        UNION ALL
        SELECT ids.event_id, 0, 0 FROM ids WHERE NOT EXISTS (SELECT 1 FROM ev WHERE ev.event_id = ids.event_id)
    )
    SELECT p.event_id, pg_catalog.sum(p.missing), pg_catalog.sum(p.extra)
      INTO v_event, v_missing, v_extra
      FROM problems p
     GROUP BY p.event_id
     ORDER BY p.event_id
     LIMIT 1;
    IF v_event IS NOT NULL THEN
        RAISE EXCEPTION 'delivery set of event incomplete or with extra rows at commit'
            USING ERRCODE = 'OB104',
                  DETAIL = pg_catalog.format('event %s: %s missing, %s extra delivery rows', v_event, v_missing, v_extra);
    END IF;
    RETURN NULL;
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_outbox_append_proofs__check() FROM PUBLIC;

-- The triggers of outbox.outbox_append_proofs. Their functions (sql/functions/<schema>/<function>.sql):
--   outbox.tg_outbox_append_proofs__check
DROP TRIGGER IF EXISTS tg_outbox_append_proofs__check ON outbox.outbox_append_proofs;
CREATE CONSTRAINT TRIGGER tg_outbox_append_proofs__check AFTER INSERT ON outbox.outbox_append_proofs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (new.queues_proof) EXECUTE FUNCTION outbox.tg_outbox_append_proofs__check();


RESET ROLE;
