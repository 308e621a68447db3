-- Claim, lease fencing, attempts, ack, retry, quarantine, recovery, publication (SPEC §4, §5)
SET LOCAL ROLE outbox_owner;

-- Normalized error codes (SPEC R-AK-7): the closed list. Retryable codes send a delivery back to
-- pending (retry_delivery); non-retryable codes are the only quarantine reasons.
INSERT INTO outbox.error_codes (code, retryable, description) VALUES
    ('consumer_unavailable', true,  'the consumer could not be reached or answered unavailable'),
    ('consumer_timeout',     true,  'the consumer did not answer within the request timeout'),
    ('capacity_protection',  true,  'the consumer or the dispatcher shed load (429 / back-pressure)'),
    ('transport_error',      true,  'the transport failed (connection, protocol, broker)'),
    ('invalid_ack',          true,  'the consumer''s ack or receipt was rejected by ack_delivery (OB002)'),
    ('awaiting_revision',    true,  'the consumer waits for an earlier aggregate revision (gap)'),
    ('database_unavailable', true,  'a database needed for the delivery was unavailable'),
    ('unsupported_schema',   false, 'the consumer does not support this event schema version'),
    ('unknown_event_type',   false, 'the consumer does not know this event type'),
    ('digest_conflict',      false, 'the envelope digest does not match, or the same event id came with another digest'),
    ('envelope_invalid',     false, 'the envelope or payload violates an invariant'),
    ('receipt_conflict',     false, 'the consumer holds a receipt for this event with another digest (OB301)'),
    ('consumer_rejected',    false, 'the consumer rejected the event as never applicable'),
    ('retry_exhausted',      false, 'max attempts of the retry policy reached');

-- Claim indexes (SPEC R-CL-6): partial over non-terminal rows only, so terminal rows
-- (acknowledged, quarantined) never slow the claim down.
--   claimable: the claim's per-destination ordered scan (available_at, created_at, event_id).
CREATE INDEX outbox_deliveries_claimable
    ON outbox.outbox_deliveries (destination, available_at, created_at, event_id)
    WHERE status = 'pending';
--   leased: recovery of expired leases; the leased set is bounded by concurrency x batch.
CREATE INDEX outbox_deliveries_leased
    ON outbox.outbox_deliveries (lease_expires_at)
    WHERE status = 'leased';
--   open by aggregate: the per_aggregate ordering check (R-CL-7), "an earlier revision of the
--   same aggregate to the same destination is still pending or leased".
CREATE INDEX outbox_deliveries_open_by_aggregate
    ON outbox.outbox_deliveries (destination, aggregate_id, aggregate_revision)
    WHERE status IN ('pending', 'leased');
-- Attempt history of a delivery (auditors, tests): starts by delivery are covered by the unique
-- (destination, event_id, attempt_number); quarantine rows by attempt for the FK.
CREATE INDEX outbox_quarantine_attempt ON outbox.outbox_quarantine (attempt_id);

-- Private helpers (granted to nobody).
-- outbox._dispatch_fence(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                        p_now timestamptz) RETURNS outbox.outbox_deliveries  (private, SPEC R-CL-3)
-- Purpose: the fencing check of renew_lease (the outcome functions apply the same rule,
--   outbox._fence_problem, to every item of a batch). Locks the delivery row (FOR UPDATE, waiting: a concurrent recovery or
--   claim of the same row finishes first and we then see its committed state) and returns it
--   only when it is leased, its current attempt is p_attempt_id, its token is p_lease_token and
--   the lease is still live at p_now (lease_expires_at > p_now).
-- Time: p_now is the caller's clock_timestamp() captured once per call (not the transaction
--   start), so a caller holding a transaction open cannot stretch a lease.
-- SQLSTATEs: OB001 with a distinct DETAIL per cause (incomplete fence, unknown delivery, not
--   leased, stale attempt, wrong token, expired lease). Nothing is changed by this function.
-- Caller: the dispatch functions above (running as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._dispatch_fence(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                       p_lease_token uuid, p_now timestamptz)
RETURNS outbox.outbox_deliveries
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_d       outbox.outbox_deliveries;
    v_problem text;
BEGIN
    SELECT d.* INTO v_d
      FROM outbox.outbox_deliveries AS d
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       FOR UPDATE;
    v_problem := outbox._fence_problem(v_d, p_destination, p_event_id, p_attempt_id, p_lease_token, p_now);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'fencing rejected' USING ERRCODE = 'OB001', DETAIL = v_problem;
    END IF;
    RETURN v_d;
END
$fn$;

COMMENT ON FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamptz) IS
    'Private: lock a delivery and check destination+event+current attempt+token+live lease, else OB001 (SPEC R-CL-3).';
REVOKE ALL ON FUNCTION outbox._dispatch_fence(text, uuid, uuid, uuid, timestamptz) FROM PUBLIC;

-- outbox._dispatch_recover(p_destinations text[], p_max_rows integer, p_now timestamptz)
-- RETURNS integer  (private, SPEC R-CL-2, R-AK-8)
-- Purpose: lease-expiry recovery in ONE statement. For up to p_max_rows leased deliveries whose
--   lease expired at p_now (all destinations when p_destinations is NULL): append the finish
--   outcome=lease_expired_unknown / retry_disposition=reclaimable to the open attempt (only if it
--   has none: ON CONFLICT on the finishes' primary key), and move the delivery back to pending
--   with available_at = p_now and the lease columns cleared. A delivery whose lease expired on
--   its last allowed attempt (attempt_count >= the destination's max_attempts) is quarantined
--   instead (reason retry_exhausted, finish lease_expired_unknown/quarantined): a delivery that
--   kills or stalls its dispatcher every time ends visibly in quarantine, never reclaimed
--   forever (SPEC R-AK-5). Returns how many attempts it closed.
-- Locking: FOR UPDATE SKIP LOCKED on the delivery rows, so it never waits for a worker that is
--   acknowledging/retrying its row right now (that worker holds the row lock; if it commits
--   first its fence succeeded and the row is no longer leased; if we lock first its fence then
--   sees a pending row and fails with OB001). Never two finishes for one start (PK).
-- Index: outbox_deliveries_leased (lease_expires_at) WHERE status = 'leased' - the leased set is
--   bounded by concurrency x batch, never by the backlog. The UPDATE finds the locked rows by
--   ctid (TID scan; they are locked by this transaction), so no plan can join the backlog.
-- SQLSTATEs: none of its own.
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
           AND d.attempt_count >= p.max_attempts
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

-- outbox._dispatch_sanitize_ref(p_ref text) RETURNS text  (private, SPEC R-AK-7, R-DP-5)
-- Purpose: sanitize a caller-supplied error reference before it is stored in
--   outbox_deliveries.last_error_ref / outbox_delivery_attempt_finishes.sanitized_error_ref:
--   control characters (incl. newlines, tabs, DEL) become spaces, runs of whitespace collapse,
--   the result is trimmed and cut to 200 characters; empty -> NULL. It is a reference (an id, a
--   status line, a request id), never payload content: callers must not pass payload bytes; the
--   cap keeps an accidental payload from being copied whole.
-- SQLSTATEs: none. IMMUTABLE.
-- Caller: outbox.retry_delivery; granted to nobody.
CREATE FUNCTION outbox._dispatch_sanitize_ref(p_ref text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT nullif(
               pg_catalog.left(
                   pg_catalog.btrim(
                       pg_catalog.regexp_replace(
                           pg_catalog.regexp_replace(p_ref, '[[:cntrl:]]', ' ', 'g'),
                           '\s+', ' ', 'g')),
                   200),
               '')
$fn$;

COMMENT ON FUNCTION outbox._dispatch_sanitize_ref(text) IS
    'Private: strip control characters, collapse whitespace, trim and cap an error reference at 200 characters; empty -> NULL (SPEC R-AK-7).';
REVOKE ALL ON FUNCTION outbox._dispatch_sanitize_ref(text) FROM PUBLIC;

-- outbox._backoff_delay(p_policy outbox.outbox_retry_policies, p_attempt_count integer)
-- RETURNS interval  (private, SPEC R-AK-5, D-5)
-- Purpose: the retry delay after the p_attempt_count-th attempt (attempt_count >= 1):
--     d     = least(max_delay, base_delay * multiplier ^ (attempt_count - 1))
--     delay = d * (1 + jitter * (2 * random() - 1))
--   so delay lies in [d * (1 - jitter), d * (1 + jitter)] (jitter < 1 by the table's CHECK, so
--   the delay is always > 0). The jittered value may exceed max_delay by at most the jitter
--   fraction; max_delay caps the exponential part. Computed in numeric seconds, so a large
--   attempt count cannot overflow the interval arithmetic.
-- SQLSTATEs: none. VOLATILE (random()).
-- Caller: outbox.retry_delivery; granted to nobody.
CREATE FUNCTION outbox._backoff_delay(p_policy outbox.outbox_retry_policies, p_attempt_count integer)
RETURNS interval
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_base numeric := pg_catalog.date_part('epoch', p_policy.base_delay)::numeric;
    v_max  numeric := pg_catalog.date_part('epoch', p_policy.max_delay)::numeric;
    v_exp  integer := greatest(coalesce(p_attempt_count, 1) - 1, 0);
    v_d    numeric;
BEGIN
    -- multiplier >= 1: once base * multiplier^k passes max it stays there; cap the exponent so
    -- the power never grows beyond what numeric handles comfortably.
    IF v_exp > 1000 THEN
        v_exp := 1000;
    END IF;
    v_d := least(v_max, v_base * pg_catalog.power(p_policy.multiplier, v_exp));
    v_d := v_d * (1 + p_policy.jitter * (2 * pg_catalog.random()::numeric - 1));
    RETURN pg_catalog.make_interval(secs => v_d::double precision);
END
$fn$;

COMMENT ON FUNCTION outbox._backoff_delay(outbox.outbox_retry_policies, integer) IS
    'Private: least(max_delay, base_delay*multiplier^(attempt_count-1)) * (1 + jitter*(2*random()-1)) (SPEC R-AK-5).';
REVOKE ALL ON FUNCTION outbox._backoff_delay(outbox.outbox_retry_policies, integer) FROM PUBLIC;

-- outbox._ensure_retry_policy(p_destination text) RETURNS void  (private, SPEC §2, D-5)
-- Purpose: insert the default retry policy of a destination if it has none: base 1 s,
--   multiplier 2, cap 5 min, jitter 0.2, max attempts 20. The history trigger records the insert.
--   Called by migration 006 for the destinations present then, by outbox.register_destination
--   for destinations registered later, and by outbox.retry_delivery as a last resort (so a
--   destination without a row still follows - and records - the default policy).
-- SQLSTATEs: 23503 when the destination is not registered (foreign key).
-- Caller: kernel functions running as outbox_owner; granted to nobody.
CREATE FUNCTION outbox._ensure_retry_policy(p_destination text)
RETURNS void
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    INSERT INTO outbox.outbox_retry_policies (destination, base_delay, multiplier, max_delay, jitter, max_attempts)
    VALUES (p_destination, interval '1 second', 2, interval '5 minutes', 0.2, 20)
    ON CONFLICT (destination) DO NOTHING
$fn$;

COMMENT ON FUNCTION outbox._ensure_retry_policy(text) IS
    'Private: insert the default retry policy (1 s, x2, cap 5 min, jitter 0.2, 20 attempts) for a destination that has none (SPEC §2).';
REVOKE ALL ON FUNCTION outbox._ensure_retry_policy(text) FROM PUBLIC;


-- Public API (SPEC §13): EXECUTE to outbox_dispatcher only (granted in each file).
-- outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval)
-- RETURNS TABLE(destination, consumer_name, event_id, attempt_id, lease_token, lease_expires_at,
--   attempt_number, expected_receipt_type, expected_receipt_schema_version,
--   required_projection_name, required_projection_version, event_envelope jsonb,
--   event_envelope_digest_algorithm_version, event_envelope_sha256, event_type,
--   event_schema_version, event_envelope_canonical)  (public, SPEC R-CL-1, R-CL-2, R-CL-5, R-CL-6, R-CL-7, §13)
-- Purpose: lease up to p_batch_size claimable deliveries of the given destinations to p_worker.
--   1. A bounded recovery step (outbox._dispatch_recover, at most p_batch_size rows of these
--      destinations) closes expired leases as lease_expired_unknown and makes them pending, so a
--      lone dispatcher recovers by itself (R-CL-2).
--   2. ONE statement: per destination, an index-ordered scan of the partial index
--      outbox_deliveries_claimable (destination, available_at, created_at, event_id)
--      WHERE status = 'pending' with FOR UPDATE SKIP LOCKED and LIMIT p_batch_size (a LATERAL
--      per destination keeps the plan index-driven with several destinations: cost is
--      O(batch x destinations), never O(backlog)); the candidates are merged in the order
--      available_at, created_at, event_id and cut to p_batch_size; an UPDATE ... RETURNING (by
--      ctid of the locked rows: a TID scan) sets status leased, a new lease token and attempt
--      id, owner, expiry = now + p_lease, attempt_count + 1, last_attempt_at; an INSERT appends
--      the immutable attempt start; each row's event is read by primary key. With several
--      destinations, rows locked by a destination's scan but cut by the merge stay locked (not
--      changed) until this short transaction ends; concurrent claimers skip them meanwhile.
--      The statement runs through EXECUTE ... USING so it is planned for the actual arguments
--      on every call: a cached generic plan (LIMIT estimated at 10 % of the table) would
--      hash-join the whole backlog and trigger JIT.
--   Eligible: status pending and available_at <= now. Terminal rows (acknowledged, quarantined)
--   are never in the index. No cursor or high-water mark is read or written.
--   Per-aggregate ordering (R-CL-7): for a destination with ordering = 'per_aggregate' a
--   delivery is skipped while a delivery of the same destination and aggregate_id with a smaller
--   aggregate_revision is pending or leased (index outbox_deliveries_open). For
--   ordering = 'none' (default) that check is not evaluated.
--   event_envelope_canonical is the canonical envelope text append_event verified or computed
--   (D-2): a caller checks sha256(text) = event_envelope_sha256 and sends those bytes, without
--   canonicalizing again (P-5). event_envelope is the same document as jsonb (rebuilt from the
--   stored columns, outbox._event_envelope, for a row without stored text). p_envelope
--   'canonical' (what the Go dispatcher passes) leaves event_envelope NULL whenever the canonical
--   text is there: turning 100 envelopes into jsonb costs more than the rest of the claim (P-4).
-- Time: now = clock_timestamp() captured once at the start of the call and used for the
--   eligibility test, the lease expiry, last_attempt_at and started_at. The claim is meant to run
--   in its own short transaction (R-CL-5: commit before calling the consumer); taking the wall
--   clock rather than the transaction start keeps the lease length exact even if the caller
--   opened the transaction earlier.
-- SQLSTATEs: 22023 invalid_parameter_value for a worker that is not a literal
--   (^[a-z0-9][a-z0-9._@-]*$, at most 200 characters), an empty/NULL destination list, a
--   destination that is not a literal or not registered, a batch size outside 1..1000, a lease
--   outside 1 second..1 hour.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.claim_deliveries(p_worker text, p_destinations text[], p_batch_size integer, p_lease interval,
                                        p_envelope text DEFAULT 'jsonb')
RETURNS TABLE (
    destination                             text,
    consumer_name                           text,
    event_id                                uuid,
    attempt_id                              uuid,
    lease_token                             uuid,
    lease_expires_at                        timestamptz,
    attempt_number                          integer,
    expected_receipt_type                   text,
    expected_receipt_schema_version         integer,
    required_projection_name                text,
    required_projection_version             integer,
    event_envelope                          jsonb,
    event_envelope_digest_algorithm_version text,
    event_envelope_sha256                   text,
    event_type                              text,
    event_schema_version                    text,
    event_envelope_canonical                text
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_now          timestamptz := pg_catalog.clock_timestamp();
    v_destinations text[];
    v_bad          text;
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
    SELECT coalesce(u.d, 'NULL') INTO v_bad
      FROM pg_catalog.unnest(p_destinations) AS u(d)
     WHERE u.d IS NULL
        OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = u.d)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'claim_deliveries: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %s is not registered in outbox.delivery_destinations', v_bad);
    END IF;
    SELECT pg_catalog.array_agg(DISTINCT u.d ORDER BY u.d) INTO v_destinations
      FROM pg_catalog.unnest(p_destinations) AS u(d);

    -- 1. bounded recovery of expired leases of these destinations (R-CL-2)
    PERFORM outbox._dispatch_recover(v_destinations, p_batch_size, v_now);

    -- 2. claim (R-CL-1). Dynamic SQL on purpose: EXECUTE ... USING plans the statement for the
    -- actual arguments on every call (a one-shot custom plan), so the LIMIT is known to the
    -- planner and a cached generic plan (which estimates LIMIT $n as 10 % of the table and then
    -- hash-joins the whole backlog) can never be used. The statement is also shaped to stay
    -- O(batch) whatever the statistics say: the UPDATE finds the locked rows by ctid (TID scan;
    -- the rows are locked by this transaction, so their ctid cannot change), and the event of
    -- each claimed row is fetched by primary key in a LATERAL ... LIMIT 1 (never a hash join over
    -- the events table).
    RETURN QUERY EXECUTE $claim$
    WITH dest AS (
        SELECT dd.destination AS dest_name, dd.ordering AS dest_ordering
          FROM outbox.delivery_destinations AS dd
         WHERE dd.destination = ANY ($1)
    ), picked AS (
        SELECT c.row_ctid
          FROM dest
         CROSS JOIN LATERAL (
                SELECT d.ctid AS row_ctid, d.available_at, d.created_at, d.event_id
                  FROM outbox.outbox_deliveries AS d
                 WHERE d.destination = dest.dest_name
                   AND d.status = 'pending'
                   AND d.available_at <= $2
                   AND (dest.dest_ordering = 'none'
                        OR NOT EXISTS (
                               SELECT 1
                                 FROM outbox.outbox_deliveries AS prior
                                WHERE prior.destination = d.destination
                                  AND prior.aggregate_id = d.aggregate_id
                                  AND prior.aggregate_revision < d.aggregate_revision
                                  AND prior.status IN ('pending', 'leased')))
                 ORDER BY d.available_at, d.created_at, d.event_id
                 LIMIT $3
                   FOR UPDATE OF d SKIP LOCKED
              ) AS c
         ORDER BY c.available_at, c.created_at, c.event_id
         LIMIT $3
    ), claimed AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status             = 'leased',
               lease_owner        = $4,
               lease_token        = pg_catalog.gen_random_uuid(),
               lease_expires_at   = $2 + $5,
               current_attempt_id = pg_catalog.gen_random_uuid(),
               attempt_count      = d.attempt_count + 1,
               last_attempt_at    = $2
         WHERE d.ctid = ANY (ARRAY(SELECT picked.row_ctid FROM picked))
           AND d.status = 'pending'
        RETURNING d.destination, d.event_id, d.consumer_name, d.current_attempt_id, d.lease_token,
                  d.lease_expires_at, d.attempt_count, d.expected_receipt_type,
                  d.expected_receipt_schema_version, d.required_projection_name,
                  d.required_projection_version, d.available_at, d.created_at
    ), started AS (
        INSERT INTO outbox.outbox_delivery_attempt_starts
               (attempt_id, destination, event_id, attempt_number, lease_token, worker, started_at)
        SELECT c.current_attempt_id, c.destination, c.event_id, c.attempt_count, c.lease_token, $4, $2
          FROM claimed AS c
        RETURNING attempt_id
    )
    SELECT c.destination, c.consumer_name, c.event_id, c.current_attempt_id, c.lease_token,
           c.lease_expires_at, c.attempt_count, c.expected_receipt_type,
           c.expected_receipt_schema_version, c.required_projection_name,
           c.required_projection_version, ev.envelope,
           ev.event_envelope_digest_algorithm_version, ev.event_envelope_sha256,
           ev.event_type, ev.schema_version, ev.canonical
      FROM claimed AS c
     CROSS JOIN LATERAL (
            SELECT CASE WHEN e.event_envelope_canonical IS NULL THEN outbox._event_envelope(e)
                        WHEN $6 = 'canonical' THEN NULL
                        ELSE e.event_envelope_canonical::jsonb END AS envelope,
                   e.event_envelope_digest_algorithm_version,
                   e.event_envelope_sha256, e.event_type, e.schema_version,
                   e.event_envelope_canonical AS canonical
              FROM outbox.outbox_events AS e
             WHERE e.event_id = c.event_id
             LIMIT 1
          ) AS ev
     ORDER BY c.available_at, c.created_at, c.event_id
    $claim$
    USING v_destinations, v_now, p_batch_size, p_worker, p_lease, p_envelope;
END
$fn$;

COMMENT ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) IS
    'Lease up to batch_size claimable deliveries (pending, available) of the destinations to worker, ordered by available_at, created_at, event_id; FOR UPDATE SKIP LOCKED; appends one attempt start per row; recovers expired leases of those destinations first. 22023 on invalid arguments. SPEC R-CL-1, R-CL-2, R-CL-6, R-CL-7.';
REVOKE ALL ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.claim_deliveries(text, text[], integer, interval, text) TO outbox_dispatcher;

-- outbox.renew_lease(p_destination text, p_event_id uuid, p_attempt_id uuid, p_lease_token uuid,
--                    p_lease interval) RETURNS timestamptz  (public, SPEC R-CL-3, R-CL-4)
-- Purpose: extend a live lease to now + p_lease and return the new expiry. The attempt, token
--   and owner stay the same; no attempt row is written.
-- Locking/fencing: outbox._dispatch_fence locks the delivery row (FOR UPDATE) and requires
--   destination + event + current attempt + token + a live lease; anything else raises OB001 and
--   changes nothing. A lease that has already expired cannot be revived, even if recovery has not
--   run yet.
-- Time: now = clock_timestamp() captured once per call (see outbox.claim_deliveries).
-- SQLSTATEs: 22023 lease outside 1 second..1 hour; OB001 fencing rejected.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.renew_lease(p_destination text, p_event_id uuid, p_attempt_id uuid,
                                   p_lease_token uuid, p_lease interval)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_expires timestamptz;
BEGIN
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'renew_lease: invalid lease'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('lease %s is outside 1 second..1 hour', p_lease);
    END IF;

    PERFORM outbox._dispatch_fence(p_destination, p_event_id, p_attempt_id, p_lease_token, v_now);

    UPDATE outbox.outbox_deliveries AS d
       SET lease_expires_at = v_now + p_lease
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       AND d.status = 'leased' AND d.current_attempt_id = p_attempt_id AND d.lease_token = p_lease_token
    RETURNING d.lease_expires_at INTO v_expires;
    IF NOT FOUND THEN -- unreachable while the fence's row lock is held; kept as the CAS guard
        RAISE EXCEPTION 'fencing rejected: lease changed concurrently'
            USING ERRCODE = 'OB001', DETAIL = pg_catalog.format('delivery %s/%s', p_destination, p_event_id);
    END IF;
    RETURN v_expires;
END
$fn$;

COMMENT ON FUNCTION outbox.renew_lease(text, uuid, uuid, uuid, interval) IS
    'Extend a live lease to now()+lease, fenced by destination+event+current attempt+lease token (OB001 otherwise); returns the new expiry. SPEC R-CL-4.';
REVOKE ALL ON FUNCTION outbox.renew_lease(text, uuid, uuid, uuid, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.renew_lease(text, uuid, uuid, uuid, interval) TO outbox_dispatcher;

-- ack_delivery, retry_delivery, quarantine_delivery: installed by 009 (batches of one of the
-- batch outcome functions); this migration installed their first, one-row versions.
-- outbox.recover_expired_leases(p_max_rows integer DEFAULT 1000) RETURNS integer
-- (public, SPEC R-CL-2, R-AK-8, §13)
-- Purpose: for up to p_max_rows leased deliveries (all destinations) whose lease has expired,
--   append the finish outcome=lease_expired_unknown / retry_disposition=reclaimable to the open
--   attempt (only if it has none) and move the delivery back to pending with available_at = now,
--   lease cleared; returns how many were recovered. One statement (outbox._dispatch_recover);
--   claim_deliveries runs the same step for its own destinations, so calling this is optional.
-- Locking: FOR UPDATE SKIP LOCKED on the deliveries - a worker holding its row (acking right now)
--   is skipped; whoever locks first wins, the other sees the committed state (the late worker's
--   fence then fails with OB001). Never two finishes for one start (finishes' primary key).
-- Time: now = clock_timestamp() captured once per call: a lease is expired when
--   lease_expires_at <= now, the same test the fence applies.
-- SQLSTATEs: 22023 when p_max_rows is outside 1..100000.
-- Caller: outbox_dispatcher.
CREATE FUNCTION outbox.recover_expired_leases(p_max_rows integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_max_rows IS NULL OR p_max_rows < 1 OR p_max_rows > 100000 THEN
        RAISE EXCEPTION 'recover_expired_leases: invalid max_rows'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('max_rows %s is outside 1..100000', p_max_rows);
    END IF;
    RETURN outbox._dispatch_recover(NULL, p_max_rows, pg_catalog.clock_timestamp());
END
$fn$;

COMMENT ON FUNCTION outbox.recover_expired_leases(integer) IS
    'Close up to max_rows expired leases as lease_expired_unknown (one finish per open attempt) and make the deliveries pending again; returns the count. SPEC R-CL-2.';
REVOKE ALL ON FUNCTION outbox.recover_expired_leases(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.recover_expired_leases(integer) TO outbox_dispatcher;

-- Operators: retry policy changes (EXECUTE to outbox_registrar).
-- outbox.set_retry_policy(p_destination text, p_base_delay interval, p_multiplier numeric,
--                         p_max_delay interval, p_jitter numeric, p_max_attempts integer)
-- RETURNS integer  (public, operators; SPEC §2, D-5, R-AK-5)
-- Purpose: insert or change the retry policy of a registered destination; returns the new
--   policy_version (1 for a new row, bumped by the trigger on every change). Every change is
--   recorded in outbox.outbox_retry_policy_history by tg_outbox_retry_policies__history
--   (changed_by = session_user). An unchanged policy is not rewritten (same version returned).
--   Applies to retries scheduled after the change; available_at already computed stays.
-- Locking: the policy row (upsert).
-- SQLSTATEs: 22023 unknown destination or a value out of range: base_delay > 0,
--   1 <= multiplier <= 10, max_delay >= base_delay, 0 <= jitter < 1, 1 <= max_attempts <= 1000.
-- Caller: outbox_registrar (and outbox_owner).
CREATE FUNCTION outbox.set_retry_policy(p_destination text, p_base_delay interval, p_multiplier numeric,
                                        p_max_delay interval, p_jitter numeric, p_max_attempts integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_version integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = p_destination) THEN
        RAISE EXCEPTION 'set_retry_policy: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %L is not registered', p_destination);
    END IF;
    IF p_base_delay IS NULL OR p_base_delay <= interval '0'
       OR p_multiplier IS NULL OR p_multiplier < 1 OR p_multiplier > 10
       OR p_max_delay IS NULL OR p_max_delay < p_base_delay
       OR p_jitter IS NULL OR p_jitter < 0 OR p_jitter >= 1
       OR p_max_attempts IS NULL OR p_max_attempts < 1 OR p_max_attempts > 1000 THEN
        RAISE EXCEPTION 'set_retry_policy: value out of range'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'need base_delay > 0, 1 <= multiplier <= 10, max_delay >= base_delay, 0 <= jitter < 1, 1 <= max_attempts <= 1000';
    END IF;

    INSERT INTO outbox.outbox_retry_policies AS rp
           (destination, base_delay, multiplier, max_delay, jitter, max_attempts)
    VALUES (p_destination, p_base_delay, p_multiplier, p_max_delay, p_jitter, p_max_attempts)
    ON CONFLICT (destination) DO UPDATE
       SET base_delay   = EXCLUDED.base_delay,
           multiplier   = EXCLUDED.multiplier,
           max_delay    = EXCLUDED.max_delay,
           jitter       = EXCLUDED.jitter,
           max_attempts = EXCLUDED.max_attempts
     WHERE (rp.base_delay, rp.multiplier, rp.max_delay, rp.jitter, rp.max_attempts)
           IS DISTINCT FROM (EXCLUDED.base_delay, EXCLUDED.multiplier, EXCLUDED.max_delay, EXCLUDED.jitter, EXCLUDED.max_attempts)
    RETURNING rp.policy_version INTO v_version;
    IF v_version IS NULL THEN
        SELECT rp.policy_version INTO v_version FROM outbox.outbox_retry_policies AS rp WHERE rp.destination = p_destination;
    END IF;
    RETURN v_version;
END
$fn$;

COMMENT ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) IS
    'Insert or change a destination''s retry policy (versioned, every change recorded in outbox_retry_policy_history); returns the policy_version. 22023 on unknown destination or out-of-range values. SPEC D-5.';
REVOKE ALL ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) TO outbox_registrar;


-- Immutability (SPEC R-SEC-3) and the versioned retry-policy history (D-5).
-- tg_outbox_delivery_attempt_starts__append_only: attempt starts are immutable facts: one per claim (SPEC §2, R-SEC-3).
-- UPDATE, DELETE and TRUNCATE raise OB202 (immutability violation) for every role, the owner
-- included; only INSERT is possible (and only through the kernel's functions: no role but the
-- owner has INSERT on the table).
CREATE FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'outbox.outbox_delivery_attempt_starts is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_delivery_attempt_starts is not allowed', TG_OP);
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only() IS
    'Trigger: outbox.outbox_delivery_attempt_starts is append-only; UPDATE/DELETE/TRUNCATE raise OB202 (SPEC R-SEC-3).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only() FROM PUBLIC;

CREATE TRIGGER tg_outbox_delivery_attempt_starts__append_only
    BEFORE UPDATE OR DELETE ON outbox.outbox_delivery_attempt_starts
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only();
CREATE TRIGGER tg_outbox_delivery_attempt_starts__append_only_truncate
    BEFORE TRUNCATE ON outbox.outbox_delivery_attempt_starts
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_starts__append_only();

-- tg_outbox_delivery_attempt_finishes__append_only: attempt finishes are immutable facts: at most one per start, never changed (SPEC §2, R-SEC-3).
-- UPDATE, DELETE and TRUNCATE raise OB202 (immutability violation) for every role, the owner
-- included; only INSERT is possible (and only through the kernel's functions: no role but the
-- owner has INSERT on the table).
CREATE FUNCTION outbox.tg_outbox_delivery_attempt_finishes__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'outbox.outbox_delivery_attempt_finishes is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_delivery_attempt_finishes is not allowed', TG_OP);
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_delivery_attempt_finishes__append_only() IS
    'Trigger: outbox.outbox_delivery_attempt_finishes is append-only; UPDATE/DELETE/TRUNCATE raise OB202 (SPEC R-SEC-3).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_delivery_attempt_finishes__append_only() FROM PUBLIC;

CREATE TRIGGER tg_outbox_delivery_attempt_finishes__append_only
    BEFORE UPDATE OR DELETE ON outbox.outbox_delivery_attempt_finishes
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_finishes__append_only();
CREATE TRIGGER tg_outbox_delivery_attempt_finishes__append_only_truncate
    BEFORE TRUNCATE ON outbox.outbox_delivery_attempt_finishes
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_delivery_attempt_finishes__append_only();

-- tg_outbox_quarantine__append_only: quarantine is a state, never a deletion (SPEC R-AK-6,
-- R-SEC-3). Rows are append-only except acknowledged_at and case_id, which an operator sets when
-- the case is taken up. Any change of another column, DELETE or TRUNCATE raises OB202, for every
-- role (the owner included).
CREATE FUNCTION outbox.tg_outbox_quarantine__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF (NEW.destination, NEW.event_id, NEW.attempt_id, NEW.reason,
            NEW.event_envelope_digest_algorithm_version, NEW.event_envelope_sha256, NEW.quarantined_at)
           IS NOT DISTINCT FROM
           (OLD.destination, OLD.event_id, OLD.attempt_id, OLD.reason,
            OLD.event_envelope_digest_algorithm_version, OLD.event_envelope_sha256, OLD.quarantined_at) THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'outbox.outbox_quarantine is append-only except acknowledged_at and case_id'
            USING ERRCODE = 'OB202',
                  DETAIL = pg_catalog.format('quarantine row %s/%s: only acknowledged_at and case_id may change',
                                             OLD.destination, OLD.event_id);
    END IF;
    RAISE EXCEPTION 'outbox.outbox_quarantine is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_quarantine is not allowed', TG_OP);
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_quarantine__append_only() IS
    'Trigger: outbox.outbox_quarantine rows are append-only except acknowledged_at/case_id; other changes, DELETE, TRUNCATE raise OB202 (SPEC R-AK-6).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_quarantine__append_only() FROM PUBLIC;

CREATE TRIGGER tg_outbox_quarantine__append_only
    BEFORE UPDATE OR DELETE ON outbox.outbox_quarantine
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();
CREATE TRIGGER tg_outbox_quarantine__append_only_truncate
    BEFORE TRUNCATE ON outbox.outbox_quarantine
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_quarantine__append_only();

-- tg_outbox_retry_policy_history__append_only: the retry-policy history is an append-only audit trail (SPEC §2, D-5).
-- UPDATE, DELETE and TRUNCATE raise OB202 (immutability violation) for every role, the owner
-- included; only INSERT is possible (and only through the kernel's functions: no role but the
-- owner has INSERT on the table).
CREATE FUNCTION outbox.tg_outbox_retry_policy_history__append_only()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'outbox.outbox_retry_policy_history is append-only'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.outbox_retry_policy_history is not allowed', TG_OP);
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_retry_policy_history__append_only() IS
    'Trigger: outbox.outbox_retry_policy_history is append-only; UPDATE/DELETE/TRUNCATE raise OB202 (SPEC R-SEC-3).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_retry_policy_history__append_only() FROM PUBLIC;

CREATE TRIGGER tg_outbox_retry_policy_history__append_only
    BEFORE UPDATE OR DELETE ON outbox.outbox_retry_policy_history
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policy_history__append_only();
CREATE TRIGGER tg_outbox_retry_policy_history__append_only_truncate
    BEFORE TRUNCATE ON outbox.outbox_retry_policy_history
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_retry_policy_history__append_only();

-- tg_outbox_retry_policies__history: retry policies are versioned configuration (SPEC §2, D-5).
--   BEFORE UPDATE (tg_outbox_retry_policies__version): the destination cannot change (OB202);
--     a real change bumps policy_version by one and sets updated_at = now(); an UPDATE that
--     changes no policy value keeps the version.
--   AFTER INSERT/UPDATE/DELETE (tg_outbox_retry_policies__history): appends the new values (the
--     old ones for DELETE) with the policy_version, the operation, changed_by = session_user (the
--     login behind any SET ROLE / SECURITY DEFINER) and changed_at = now() to
--     outbox.outbox_retry_policy_history (itself append-only).
--   TRUNCATE raises OB202 (it would bypass the history).
-- The history function is SECURITY DEFINER (owner) so that whoever may change a policy also
-- records it, without INSERT on the history table.
CREATE FUNCTION outbox.tg_outbox_retry_policies__version()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'outbox.outbox_retry_policies cannot be truncated'
            USING ERRCODE = 'OB202', DETAIL = 'delete policies row by row so that the history records them';
    END IF;
    IF NEW.destination IS DISTINCT FROM OLD.destination THEN
        RAISE EXCEPTION 'outbox.outbox_retry_policies: destination is immutable'
            USING ERRCODE = 'OB202',
                  DETAIL = pg_catalog.format('policy of %s cannot be moved to %s', OLD.destination, NEW.destination);
    END IF;
    IF (NEW.base_delay, NEW.multiplier, NEW.max_delay, NEW.jitter, NEW.max_attempts)
       IS DISTINCT FROM (OLD.base_delay, OLD.multiplier, OLD.max_delay, OLD.jitter, OLD.max_attempts) THEN
        NEW.policy_version := OLD.policy_version + 1;
        NEW.updated_at := pg_catalog.now();
    ELSE
        NEW.policy_version := OLD.policy_version;
        NEW.updated_at := OLD.updated_at;
    END IF;
    RETURN NEW;
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_retry_policies__version() IS
    'Trigger: bump policy_version on every change of a retry policy; destination immutable; no TRUNCATE (SPEC D-5).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_retry_policies__version() FROM PUBLIC;

CREATE FUNCTION outbox.tg_outbox_retry_policies__history()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_row outbox.outbox_retry_policies;
BEGIN
    IF TG_OP = 'DELETE' THEN
        v_row := OLD;
    ELSE
        v_row := NEW;
    END IF;
    INSERT INTO outbox.outbox_retry_policy_history
           (destination, policy_version, operation, base_delay, multiplier, max_delay, jitter,
            max_attempts, changed_by, changed_at)
    VALUES (v_row.destination, v_row.policy_version, TG_OP, v_row.base_delay, v_row.multiplier,
            v_row.max_delay, v_row.jitter, v_row.max_attempts, session_user, pg_catalog.now());
    RETURN NULL;
END
$fn$;

COMMENT ON FUNCTION outbox.tg_outbox_retry_policies__history() IS
    'Trigger: append every INSERT/UPDATE/DELETE of a retry policy to outbox_retry_policy_history with changed_by = session_user (SPEC D-5).';
REVOKE ALL ON FUNCTION outbox.tg_outbox_retry_policies__history() FROM PUBLIC;

CREATE TRIGGER tg_outbox_retry_policies__version
    BEFORE UPDATE ON outbox.outbox_retry_policies
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policies__version();
CREATE TRIGGER tg_outbox_retry_policies__no_truncate
    BEFORE TRUNCATE ON outbox.outbox_retry_policies
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_retry_policies__version();
CREATE TRIGGER tg_outbox_retry_policies__history
    AFTER INSERT OR UPDATE OR DELETE ON outbox.outbox_retry_policies
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_retry_policies__history();


-- Default retry policies (SPEC §2): every destination registered so far has one (register_destination
-- inserts it; this catches any that do not), and the rows written before the history trigger
-- existed get their INSERT history row now.
SELECT outbox._ensure_retry_policy(dd.destination) FROM outbox.delivery_destinations AS dd;
INSERT INTO outbox.outbox_retry_policy_history
       (destination, policy_version, operation, base_delay, multiplier, max_delay, jitter, max_attempts, changed_by, changed_at)
SELECT rp.destination, rp.policy_version, 'INSERT', rp.base_delay, rp.multiplier, rp.max_delay, rp.jitter,
       rp.max_attempts, session_user, rp.updated_at
  FROM outbox.outbox_retry_policies AS rp
 WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_retry_policy_history AS h WHERE h.destination = rp.destination);

-- Grants (SPEC R-SEC-1): outbox_dispatcher has no table privilege at all - it acts only through
-- the SECURITY DEFINER functions above. The auditor reads attempts, quarantine and policies.
GRANT SELECT ON outbox.outbox_delivery_attempt_starts, outbox.outbox_delivery_attempt_finishes,
                outbox.outbox_quarantine, outbox.outbox_retry_policies, outbox.outbox_retry_policy_history,
                outbox.error_codes
    TO outbox_auditor;

RESET ROLE;
