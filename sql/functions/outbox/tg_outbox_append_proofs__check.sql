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
