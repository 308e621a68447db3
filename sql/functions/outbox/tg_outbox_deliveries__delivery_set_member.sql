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
