-- outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval)
-- RETURNS TABLE(destination, consumer_name, event_id, attempt_id, lease_token, lease_expires_at, ...,
--   event_envelope jsonb, event_envelope_sha256, event_envelope_canonical, traceparent, tracestate)
--   (public, SPEC R-CL-1, R-CL-2, R-CL-5, R-CL-6, R-CL-7, R-PV-2, §13; HP-1, HP-3)
-- Purpose: lease up to p_batch_size claimable deliveries (pending, available_at <= now) of the given
--   destinations to p_worker, in (available_at, created_at, event_id) order, after a bounded
--   recovery of expired leases; per-aggregate ordering and claim pauses respected; O(batch), never
--   O(backlog). event_envelope_canonical is the verified canonical text (send it as is, P-5).
-- traceparent/tracestate: the event's W3C trace context (R-DP-7), NULL when none.
-- Time: clock_timestamp() once per call. Run it in its own short transaction (R-CL-5).
-- SQLSTATEs: 22023 invalid_parameter_value for a worker that is not a literal, an empty/NULL or
--   unregistered destination, a batch size outside 1..1000, a lease outside 1 second..1 hour.
-- Design notes (steps, plans, locking): docs/performance-notes.md#outboxclaim_deliveries
-- Caller: outbox_dispatcher.
CREATE OR REPLACE FUNCTION outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval, p_envelope text DEFAULT 'jsonb'::text)
 RETURNS TABLE(destination text, consumer_name text, event_id uuid, attempt_id uuid, lease_token uuid, lease_expires_at timestamp with time zone, attempt_number integer, expected_receipt_type text, expected_receipt_schema_version integer, required_projection_name text, required_projection_version integer, event_envelope jsonb, event_envelope_digest_algorithm_version text, event_envelope_sha256 text, event_type text, event_schema_version text, event_envelope_canonical text, traceparent text, tracestate text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_now          timestamptz := pg_catalog.clock_timestamp();
    v_destinations text[];
    v_claimable    text[];
    v_bad          text;
    v_expired      boolean;
BEGIN
    IF p_worker IS NULL OR p_worker !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_worker) > 200 THEN
        RAISE EXCEPTION 'claim_deliveries: invalid worker'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('worker %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_worker);
    END IF;
    IF p_batch_size IS NULL OR p_batch_size < 1 OR p_batch_size > 1000 THEN
        RAISE EXCEPTION 'claim_deliveries: invalid batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('batch_size %s is outside 1..1000', p_batch_size);
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'claim_deliveries: invalid lease'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('lease %s is outside 1 second..1 hour', p_lease);
    END IF;
    IF p_envelope IS NULL OR p_envelope NOT IN ('jsonb', 'canonical') THEN
        RAISE EXCEPTION 'claim_deliveries: invalid envelope form'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('envelope %L must be jsonb or canonical', p_envelope);
    END IF;
    IF p_destinations IS NULL OR pg_catalog.cardinality(p_destinations) = 0 THEN
        RAISE EXCEPTION 'claim_deliveries: no destinations'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'destinations must be a non-empty array of registered destinations';
    END IF;
    -- one statement for the four look-ups before the claim: the first unknown destination, the
    -- distinct sorted list, the same list without paused destinations (R-PV-2: a primary-key
    -- probe of outbox.destination_claim_pauses per destination) and the lease-expiry probe (an
    -- index probe of the small leased index, outbox_deliveries_leased; its answer is used only
    -- when every destination is known)
    SELECT (SELECT coalesce(u.d, 'NULL')
              FROM pg_catalog.unnest(p_destinations) AS u(d)
             WHERE u.d IS NULL
                OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = u.d)
             LIMIT 1),
           (SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) FROM pg_catalog.unnest(p_destinations) AS u(d)),
           (SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) FROM pg_catalog.unnest(p_destinations) AS u(d)
             WHERE NOT EXISTS (SELECT 1 FROM outbox.destination_claim_pauses AS cp WHERE cp.destination = u.d)),
           -- (the destination test is a filter only - IS TRUE is not indexable - so the probe is
           -- always a range scan of the leased index, never a scan of the open-deliveries index by
           -- destination that a plan on unanalyzed tables may prefer: HP-3)
           EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS x
                    WHERE x.status = 'leased' AND x.lease_expires_at <= v_now
                      AND (x.destination = ANY (p_destinations)) IS TRUE)
      INTO v_bad, v_destinations, v_claimable, v_expired;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'claim_deliveries: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %s is not registered in outbox.delivery_destinations', v_bad);
    END IF;

    -- 1. bounded recovery of expired leases of these destinations (R-CL-2), only when one
    --    exists (R-SEC-5: a burst of wake-ups must not multiply the recovery work)
    IF v_expired THEN
        PERFORM outbox._dispatch_recover(v_destinations, p_batch_size, v_now);
    END IF;
    IF v_claimable IS NULL THEN
        RETURN; -- every destination is paused (R-PV-2)
    END IF;

    -- 2. claim (R-CL-1), one statement. Static SQL under plan_cache_mode = force_custom_plan
    -- (the function's SET clause, HP-3): parsed once per session, planned for the actual
    -- arguments on every call, so no generic plan made while the table was small or unanalyzed
    -- (LIMIT $n estimated at 10 % of the table, an index scanned by destination only) is ever
    -- reused. The statement is also shaped to stay O(batch) whatever the statistics say: the
    -- UPDATE finds the locked rows by ctid (TID scan; locked by this transaction, so their ctid
    -- cannot change), and the event of each claimed row is fetched by primary key in a
    -- LATERAL ... LIMIT 1 (never a hash join over the events table).
    RETURN QUERY
    WITH dest AS (
        SELECT dd.destination AS dest_name, dd.ordering AS dest_ordering
          FROM outbox.delivery_destinations AS dd
         WHERE dd.destination = ANY (v_claimable)
    ), picked AS (
        SELECT c.row_ctid
          FROM dest
         CROSS JOIN LATERAL (
                SELECT d.ctid AS row_ctid, d.available_at, d.created_at, d.event_id
                  FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = dest.dest_name
                   AND d.status = 'pending'
                   AND d.available_at <= v_now
                   AND (dest.dest_ordering = 'none'
                        OR NOT EXISTS (
                               SELECT 1
                                 FROM outbox.outbox_deliveries AS prior
                                WHERE prior.destination = d.destination
                                  AND prior.aggregate_id = d.aggregate_id
                                  AND prior.aggregate_revision < d.aggregate_revision
                                  AND prior.status IN ('pending', 'leased')))
                 ORDER BY d.available_at, d.created_at, d.event_id
                 LIMIT p_batch_size
                   FOR UPDATE OF d SKIP LOCKED
              ) AS c
         ORDER BY c.available_at, c.created_at, c.event_id
         LIMIT p_batch_size
    ), claimed AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status             = 'leased',
               lease_owner        = p_worker,
               lease_token        = pg_catalog.gen_random_uuid(),
               lease_expires_at   = v_now + p_lease,
               current_attempt_id = pg_catalog.gen_random_uuid(),
               attempt_count      = d.attempt_count + 1,
               last_attempt_at    = v_now
         WHERE d.ctid = ANY (ARRAY(SELECT picked.row_ctid FROM picked))
           -- true of every picked row (locked, so unchanged); written as one row comparison so
           -- it can only be a filter: the rows are found by ctid (a TID scan), never through the
           -- claimable index that a plan on small or unanalyzed tables might prefer (HP-3)
           AND (d.status, d.destination = ANY (v_claimable), d.available_at <= v_now)
               IS NOT DISTINCT FROM ('pending', true, true)
        RETURNING d.destination AS c_destination, d.event_id AS c_event_id, d.consumer_name AS c_consumer_name,
                  d.current_attempt_id AS c_attempt_id, d.lease_token AS c_lease_token,
                  d.lease_expires_at AS c_lease_expires_at, d.attempt_count AS c_attempt_count,
                  d.expected_receipt_type AS c_receipt_type, d.expected_receipt_schema_version AS c_receipt_version,
                  d.required_projection_name AS c_projection_name, d.required_projection_version AS c_projection_version,
                  d.available_at AS c_available_at, d.created_at AS c_created_at
    ), started AS (
        -- the immutable attempt starts, one set-based INSERT (HP-5); no foreign key check per
        -- row: each start is built from the delivery row this statement just updated
        -- (migration 019 dropped the start -> delivery foreign key, see its header)
        INSERT INTO outbox.outbox_delivery_attempt_starts
               (attempt_id, destination, event_id, attempt_number, lease_token, worker, started_at)
        SELECT c.c_attempt_id, c.c_destination, c.c_event_id, c.c_attempt_count, c.c_lease_token, p_worker, v_now
          FROM claimed AS c
    )
    SELECT c.c_destination, c.c_consumer_name, c.c_event_id, c.c_attempt_id, c.c_lease_token,
           c.c_lease_expires_at, c.c_attempt_count, c.c_receipt_type,
           c.c_receipt_version, c.c_projection_name,
           c.c_projection_version, ev.envelope,
           ev.event_envelope_digest_algorithm_version, ev.event_envelope_sha256,
           ev.event_type, ev.schema_version, ev.canonical, ev.traceparent, ev.tracestate
      FROM claimed AS c
     CROSS JOIN LATERAL (
            SELECT CASE WHEN e.event_envelope_canonical IS NULL THEN outbox._event_envelope(e)
                        WHEN p_envelope = 'canonical' THEN NULL
                        ELSE e.event_envelope_canonical::jsonb END AS envelope,
                   e.event_envelope_digest_algorithm_version,
                   e.event_envelope_sha256, e.event_type, e.schema_version,
                   e.event_envelope_canonical AS canonical, e.traceparent, e.tracestate
              FROM outbox.outbox_events AS e
             WHERE e.event_id = c.c_event_id
             LIMIT 1
          ) AS ev
     ORDER BY c.c_available_at, c.c_created_at, c.c_event_id;
END
$function$;

COMMENT ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) IS
    'Lease up to batch_size claimable deliveries (pending, available) of the destinations to worker, ordered by available_at, created_at, event_id; FOR UPDATE SKIP LOCKED; appends one attempt start per row; recovers expired leases of those destinations first. 22023 on invalid arguments. SPEC R-CL-1, R-CL-2, R-CL-6, R-CL-7.';

REVOKE ALL ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) TO outbox_dispatcher;
