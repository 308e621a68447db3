-- Typed outcome arrays (issue 35 item 4; SPEC §12a HP-2, HP-1; R-AK-9).
-- ack_deliveries, retry_deliveries and quarantine_deliveries gain a typed overload taking the
-- items as parallel arrays (destinations text[], event ids, attempt ids and lease tokens uuid[],
-- then the call's own arrays: acks/receipts json[] and digest candidates text[]; error codes and
-- refs text[]; reasons, error codes and refs text[]), as internal/pgcall sends them, so a batch
-- is never parsed from one JSON document. The JSON form (SPEC §13) stays for other callers, with
-- the same behaviour. So that the rule lives in one place, the body of each function after its
-- parse moves, unchanged, into a private function taking the parsed batch (outbox.outcome_items):
-- outbox._ack_outcomes, _retry_outcomes, _quarantine_outcomes (with the planner settings the
-- public function had); both public forms parse (outbox._outcome_items, JSON or the new typed
-- overload with the same per-item 22023 problems) and call it once per batch (HP-1: the number
-- of function calls per batch stays constant, one more than before).
-- No table changes, no backfill; functions only (no lock beyond the catalog's).
SET LOCAL ROLE outbox_owner;

-- sql/functions/outbox/_ack_outcomes.sql
-- outbox._ack_outcomes(p_batch outbox.outcome_items)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (private, SPEC R-AK-9, HP-1, HP-2; the rule of outbox.ack_deliveries, whose header says what it does)
-- Purpose: judge and record one parsed batch of ack_deliveries: p_batch is the one parse of the batch
--   (outbox._outcome_items: from the JSON form or from the typed parallel arrays), items in
--   input order with their 22023 shape problems already in sqlstate/detail. Both public forms of
--   outbox.ack_deliveries call it once per batch, so the rule lives here once.
-- Caller: outbox.ack_deliveries (both forms); granted to nobody (it runs as the owner inside them).
CREATE OR REPLACE FUNCTION outbox._ack_outcomes(p_batch outbox.outcome_items)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_ord       integer[];
    v_dest      text[];
    v_event     uuid[];
    v_attempt   uuid[];
    v_token     uuid[];
    v_ack       json[];
    v_receipt   json[];
    v_rcb       jsonb[];
    v_cand      text[];
    v_state     text[];
    v_detail    text[];
    v_ctid      tid[];
    v_dup       boolean;
    v_events    uuid[];
    v_acked_dest  text[];
    v_acked_event uuid[];
    v_published uuid[];
BEGIN
    -- 1. parse once (HP-2): the one parser of outcome batches
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.ack, p.receipt, p.receipt_jsonb,
           p.receipt_digest_candidate, p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_rcb, v_cand, v_state, v_detail
      FROM (SELECT (p_batch).*) AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    SELECT pg_catalog.count(*) <> pg_catalog.count(DISTINCT (u.dest, u.ev)) INTO v_dup
      FROM unnest(v_dest, v_event) AS u(dest, ev);

    -- 2. lock the named deliveries in a fixed order (concurrent batches cannot deadlock on them)
    PERFORM outbox._lock_deliveries(v_dest, v_event);

    -- 3. judge every item in one statement (a fresh statement: it sees the committed state of
    --    the rows locked above). fast_ok is the cheap predicate; the full rule runs only where it
    --    is false (a MATERIALIZED CTE evaluates each CASE once per item).
    WITH kinds AS MATERIALIZED (
        -- per destination of the batch, its receipt kind's canonical texts as format() templates,
        -- members in RFC 8785 order (COLLATE "C"; every member name is ASCII), each member
        -- written with a leading comma: %1$s time, %2$s Ref, %3$s Digest, %4$s consumerName,
        -- %5$s destination, %6$s eventEnvelopeSha256, %7$s eventId, %8$s SchemaVersion, and
        -- %9$s..%16$s the kind's registered members (outbox._receipt_member_piece, in member
        -- order; a kind with more than 8 has no template: its acks take the full rule)
        SELECT dd.destination AS k_dest, rk.receipt_kind, rk.receipt_type, rk.field_prefix AS p, rk.time_field,
               (SELECT '{' || pg_catalog.string_agg(t.piece, ',' ORDER BY t.k COLLATE "C") || '}'
                  FROM (VALUES ('kind', '"kind":' || pg_catalog.to_json(rk.receipt_kind)::text),
                               (rk.field_prefix || 'Ref', '"' || rk.field_prefix || 'Ref":%1$s'),
                               (rk.field_prefix || 'SchemaVersion', '"' || rk.field_prefix || 'SchemaVersion":%2$s'),
                               (rk.field_prefix || 'DigestAlgorithmVersion', '"' || rk.field_prefix || 'DigestAlgorithmVersion":"jcs-sha256-v1"'),
                               (rk.field_prefix || 'Digest', '"' || rk.field_prefix || 'Digest":%3$s')) AS t(k, piece)) AS ar_tmpl,
               CASE WHEN mm.n <= 8 THEN t.rc_tmpl END AS rc_tmpl,
               CASE WHEN mm.n <= 8 THEN t.cand_tmpl END AS cand_tmpl,
               coalesce(mm.mem, '{}'::text[]) AS mem, coalesce(mm.typ, '{}'::text[]) AS typ,
               coalesce(mm.mins, '{}'::bigint[]) AS mins, coalesce(mm.maxl, '{}'::integer[]) AS maxl,
               coalesce(mm.required, '{}'::text[]) AS required
          FROM outbox.delivery_destinations AS dd
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         CROSS JOIN LATERAL (
                SELECT pg_catalog.count(*) AS n,
                       pg_catalog.array_agg(m.member ORDER BY m.member COLLATE "C") AS mem,
                       pg_catalog.array_agg(m.json_type ORDER BY m.member COLLATE "C") AS typ,
                       pg_catalog.array_agg(m.minimum ORDER BY m.member COLLATE "C") AS mins,
                       pg_catalog.array_agg(m.max_length ORDER BY m.member COLLATE "C") AS maxl,
                       pg_catalog.array_agg(m.member) FILTER (WHERE m.required) AS required
                  FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = rk.receipt_kind
              ) AS mm
         CROSS JOIN LATERAL (
                SELECT pg_catalog.string_agg(b.piece, '' ORDER BY b.k COLLATE "C") AS rc_tmpl,
                       pg_catalog.string_agg(b.piece, '' ORDER BY b.k COLLATE "C") FILTER (WHERE b.in_candidate) AS cand_tmpl
                  FROM (SELECT v.k, v.piece, v.in_candidate
                          FROM (VALUES (rk.time_field, ',"' || rk.time_field || '":%1$s', false),
                                       (rk.field_prefix || 'Ref', ',"' || rk.field_prefix || 'Ref":%2$s', false),
                                       (rk.field_prefix || 'Digest', ',"' || rk.field_prefix || 'Digest":%3$s', false),
                                       ('consumerName', ',"consumerName":%4$s', true),
                                       ('destination', ',"destination":%5$s', true),
                                       ('eventEnvelopeSha256', ',"eventEnvelopeSha256":%6$s', true),
                                       ('eventId', ',"eventId":%7$s', true),
                                       (rk.field_prefix || 'SchemaVersion', ',"' || rk.field_prefix || 'SchemaVersion":%8$s', true),
                                       ('eventEnvelopeDigestAlgorithmVersion', ',"eventEnvelopeDigestAlgorithmVersion":"jcs-sha256-v1"', true),
                                       (rk.field_prefix || 'DigestAlgorithmVersion', ',"' || rk.field_prefix || 'DigestAlgorithmVersion":"jcs-sha256-v1"', true)
                               ) AS v(k, piece, in_candidate)
                        UNION ALL
                        SELECT m.member, '%' || (8 + m.i)::text || '$s', true
                          FROM pg_catalog.unnest(mm.mem) WITH ORDINALITY AS m(member, i)) AS b
              ) AS t
         WHERE dd.destination IN (SELECT DISTINCT x.dest FROM unnest(v_dest) AS x(dest))
    ), items AS (
        -- rn: the item's place among the items naming the same delivery (counted only when the
        -- batch names a delivery twice - no sort of the items otherwise)
        SELECT x.*,
               CASE WHEN v_dup THEN 1 + (SELECT pg_catalog.count(*) FROM unnest(v_dest, v_event, v_ord) AS y(dest, ev, ord)
                                          WHERE y.dest = x.dest AND y.ev = x.ev AND y.ord < x.ord)
                    ELSE 1 END AS rn
          FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_ack, v_receipt, v_rcb, v_cand, v_state, v_detail)
               AS x(ord, dest, ev, att, tok, ack, rc, rcb, cand, state, detail)
    ), judged AS MATERIALIZED (
        SELECT u.ord, u.state, u.detail, d.ctid AS row_ctid,
               (u.state IS NULL AND u.rn = 1
                AND d.status = 'leased' AND d.current_attempt_id = u.att AND d.lease_token = u.tok
                AND d.lease_expires_at > v_now
                AND k.receipt_type = d.expected_receipt_type
                AND u.rcb ?& k.required
                AND (d.required_projection_name IS NULL OR u.rcb ?& ARRAY['projectionName', 'projectionVersion'])
                AND pg_catalog.jsonb_typeof(u.rcb->(k.p || 'Ref')) = 'string'
                AND pg_catalog.length(u.rcb->>(k.p || 'Ref')) BETWEEN 1 AND 500
                -- (the digest's form needs no test: it must equal the hex sha256 below)
                AND pg_catalog.jsonb_typeof(u.rcb->(k.p || 'Digest')) = 'string'
                -- the time: UTC RFC 3339 with 6 fractional digits and Z, a real date and time
                -- (digits everywhere but the separators, at their places; no regex: cheaper)
                AND pg_catalog.jsonb_typeof(u.rcb->k.time_field) = 'string'
                AND CASE WHEN pg_catalog.length(t.t) = 27
                              AND pg_catalog.translate(t.t, '0123456789', '') = '--T::.Z'
                              AND pg_catalog.substr(t.t, 5, 1) || pg_catalog.substr(t.t, 8, 1) || pg_catalog.substr(t.t, 11, 1)
                                  || pg_catalog.substr(t.t, 14, 1) || pg_catalog.substr(t.t, 17, 1)
                                  || pg_catalog.substr(t.t, 20, 1) || pg_catalog.substr(t.t, 27, 1) = '--T::.Z'
                              AND pg_catalog.substr(t.t, 1, 4) COLLATE "C" <> '0000'
                              AND pg_catalog.substr(t.t, 6, 2) COLLATE "C" BETWEEN '01' AND '12'
                              AND pg_catalog.substr(t.t, 9, 2) COLLATE "C" >= '01'
                              AND pg_catalog.substr(t.t, 12, 2) COLLATE "C" < '24'
                              AND pg_catalog.substr(t.t, 15, 2) COLLATE "C" < '60'
                              AND pg_catalog.substr(t.t, 18, 2) COLLATE "C" < '60'
                         THEN pg_catalog.substr(t.t, 9, 2)::integer
                              <= pg_catalog.date_part('day', pg_catalog.make_date(pg_catalog.substr(t.t, 1, 4)::integer,
                                                                                 pg_catalog.substr(t.t, 6, 2)::integer, 1)
                                                             + interval '1 month' - interval '1 day')
                         ELSE false END
                -- the receipt is exactly its canonical text rebuilt from what the kernel knows
                AND u.rc::text = '{' || pg_catalog.substr(pg_catalog.format(k.rc_tmpl, VARIADIC r.args), 2) || '}'
                -- its digest is jcs-sha256-v1 of the candidate (the same text minus Ref, Digest, time)
                AND pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
                        '{' || pg_catalog.substr(pg_catalog.format(k.cand_tmpl, VARIADIC r.args), 2) || '}', 'UTF8')), 'hex')
                    = u.rcb->>(k.p || 'Digest')
                -- and the ack is exactly the canonical ActiveConsumerAck@1 of that receipt
                AND u.ack::text = pg_catalog.format(
                        '{"appliedReceipt":%s,"consumerName":%s,"destination":%s,"eventEnvelopeDigestAlgorithmVersion":%s,"eventEnvelopeSha256":%s,"eventId":%s}',
                        pg_catalog.format(k.ar_tmpl, u.rcb->(k.p || 'Ref'), d.expected_receipt_schema_version, u.rcb->(k.p || 'Digest')),
                        pg_catalog.to_json(d.consumer_name), pg_catalog.to_json(d.destination),
                        pg_catalog.to_json(e.event_envelope_digest_algorithm_version),
                        pg_catalog.to_json(e.event_envelope_sha256), pg_catalog.to_json(d.event_id::text))
               ) IS TRUE AS fast_ok,
               u.dest, u.ev, u.att, u.tok, u.ack, u.rc, u.cand, u.rn
          FROM items AS u
          LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
          LEFT JOIN outbox.outbox_events AS e ON e.event_id = u.ev
          LEFT JOIN kinds AS k ON k.k_dest = u.dest
         CROSS JOIN LATERAL (SELECT u.rcb->>k.time_field AS t) AS t
         CROSS JOIN LATERAL (
                SELECT ARRAY[(u.rcb->k.time_field)::text, (u.rcb->(k.p || 'Ref'))::text, (u.rcb->(k.p || 'Digest'))::text,
                             pg_catalog.to_json(d.consumer_name)::text, pg_catalog.to_json(d.destination)::text,
                             pg_catalog.to_json(e.event_envelope_sha256)::text, pg_catalog.to_json(d.event_id::text)::text,
                             d.expected_receipt_schema_version::text,
                             outbox._receipt_member_piece(u.rcb, k.mem[1], k.typ[1], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[1], k.maxl[1]),
                             outbox._receipt_member_piece(u.rcb, k.mem[2], k.typ[2], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[2], k.maxl[2]),
                             outbox._receipt_member_piece(u.rcb, k.mem[3], k.typ[3], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[3], k.maxl[3]),
                             outbox._receipt_member_piece(u.rcb, k.mem[4], k.typ[4], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[4], k.maxl[4]),
                             outbox._receipt_member_piece(u.rcb, k.mem[5], k.typ[5], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[5], k.maxl[5]),
                             outbox._receipt_member_piece(u.rcb, k.mem[6], k.typ[6], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[6], k.maxl[6]),
                             outbox._receipt_member_piece(u.rcb, k.mem[7], k.typ[7], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[7], k.maxl[7]),
                             outbox._receipt_member_piece(u.rcb, k.mem[8], k.typ[8], d.required_projection_name, d.required_projection_version, e.event_type, e.schema_version, k.mins[8], k.maxl[8])
                            ] AS args
                OFFSET 0
              ) AS r
    )
    -- only the items the predicate rejected go through the rule itself (the same for one row or
    -- a batch): outbox._ack_item_problem; OFFSET 0 keeps it one call per such item
    SELECT pg_catalog.array_agg(CASE WHEN j.state IS NOT NULL THEN j.state
                                     WHEN j.fast_ok THEN NULL
                                     ELSE v.verdict[1] END ORDER BY j.ord),
           pg_catalog.array_agg(CASE WHEN j.state IS NOT NULL THEN j.detail
                                     WHEN j.fast_ok THEN NULL
                                     ELSE v.verdict[2] END ORDER BY j.ord),
           pg_catalog.array_agg(j.row_ctid ORDER BY j.ord)
      INTO v_state, v_detail, v_ctid
      FROM judged AS j
     CROSS JOIN LATERAL (
            SELECT CASE WHEN j.state IS NULL AND NOT j.fast_ok
                        THEN outbox._ack_item_problem(j.rn, j.dest, j.ev, j.att, j.tok, j.ack, j.rc, j.cand, v_now) END AS verdict
            OFFSET 0
          ) AS v;

    -- 4. the accepted items (R-AK-3): acknowledged with the ack columns (the ack equals the
    --    delivery, the event and the receipt's quartet: the judge proved it), found by ctid of the
    --    rows locked above, and their success finishes (keeping the receipt body for the audit
    --    sweep outbox.verify_ack_digests) - one statement
    WITH ok AS (
        SELECT u.row_ctid, u.dest, u.ev, u.att, u.tok, u.rc, u.rcb
          FROM unnest(v_ctid, v_dest, v_event, v_attempt, v_token, v_receipt, v_rcb, v_state)
               AS u(row_ctid, dest, ev, att, tok, rc, rcb, state)
         WHERE u.state IS NULL
    ), acked AS (
        UPDATE outbox.outbox_deliveries AS d
           SET status                                      = 'acknowledged',
               delivered_at                                = v_now,
               lease_owner                                 = NULL,
               lease_token                                 = NULL,
               lease_expires_at                            = NULL,
               ack_consumer_name                           = d.consumer_name,
               ack_receipt_kind                            = rk.receipt_kind,
               ack_receipt_type                            = rk.receipt_type,
               ack_receipt_ref                             = ok.rcb->>(rk.field_prefix || 'Ref'),
               ack_receipt_schema_version                  = d.expected_receipt_schema_version,
               ack_receipt_digest_algorithm_version        = 'jcs-sha256-v1',
               ack_receipt_digest                          = ok.rcb->>(rk.field_prefix || 'Digest'),
               ack_event_envelope_digest_algorithm_version = ok.rcb->>'eventEnvelopeDigestAlgorithmVersion',
               ack_event_envelope_sha256                   = ok.rcb->>'eventEnvelopeSha256'
          FROM ok
          JOIN outbox.delivery_destinations AS dd ON dd.destination = ok.dest
          JOIN outbox.receipt_kinds AS rk ON rk.receipt_kind = dd.receipt_kind
         WHERE d.ctid = ok.row_ctid
           -- true of every judged row (locked since step 2, so unchanged); written as one row
           -- comparison so it can only be a filter: the row is found by its ctid (a TID scan),
           -- never through an index a plan made on small tables might prefer (HP-3)
           AND (d.destination, d.event_id, d.status, d.current_attempt_id, d.lease_token)
               IS NOT DISTINCT FROM (ok.dest, ok.ev, 'leased', ok.att, ok.tok)
        RETURNING d.event_id, d.destination, d.current_attempt_id, ok.rc
    ), finished AS (
        INSERT INTO outbox.outbox_delivery_attempt_finishes
               (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref, receipt)
        SELECT acked.current_attempt_id, v_now, 'acknowledged', 'none', NULL, NULL, acked.rc FROM acked
        RETURNING attempt_id
    )
    SELECT pg_catalog.array_agg(DISTINCT acked.event_id), pg_catalog.array_agg(acked.destination),
           pg_catalog.array_agg(acked.event_id)
      INTO v_events, v_acked_dest, v_acked_event
      FROM acked;

    -- 4b. an acknowledged head no longer holds its aggregate's chain (R-CL-6, R-CL-7)
    PERFORM outbox._release_successors(v_acked_dest, v_acked_event, v_now);

    -- 5. publication, once per event (R-AK-4, HP-4)
    v_published := outbox._publish_events(v_events, v_now);

    RETURN QUERY
    SELECT u.dest, u.ev, u.att,
           CASE WHEN u.state IS NOT NULL THEN 'rejected'
                WHEN u.ev = ANY (v_published) THEN 'complete'
                ELSE 'not_complete' END,
           u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_state, v_detail) AS u(ord, dest, ev, att, state, detail)
     ORDER BY u.ord;
END
$function$;

COMMENT ON FUNCTION outbox._ack_outcomes(outbox.outcome_items) IS
    'Private: the body of outbox.ack_deliveries for a parsed batch (outbox.outcome_items from either form: JSON or typed arrays); one call per batch (SPEC R-AK-9, HP-1, HP-2).';

REVOKE ALL ON FUNCTION outbox._ack_outcomes(outbox.outcome_items) FROM PUBLIC;

-- sql/functions/outbox/_outcome_items.sql
-- outbox._outcome_items(p_items json, p_call text) RETURNS outbox.outcome_items
-- (private, SPEC R-AK-9, HP-1, HP-2; details in docs/contract.md "Batch outcomes")
-- Purpose: THE parse of an outcome batch for p_call = ack_deliveries | retry_deliveries |
--   quarantine_deliveries: one value of the composite outbox.outcome_items (typed parallel
--   arrays, element i = item i in input order). Acks in the layout internal/pgcall sends are
--   read by one json_to_recordset (fast form); any other batch goes through the generic
--   parser outbox._batch_items, and each item's 22023 problem (shape, receiptDigestCandidate,
--   reason, errorCode, errorRef) is in sqlstate/detail. errorRef is sanitized.
-- One call per batch, never per item (HP-1). SQLSTATEs (whole call, from outbox._batch_items):
--   22023 not a JSON array or more than 1000 items; OB201 unreadable (\u0000).
-- The typed overload outbox._outcome_items(p_call, destinations, event ids, attempt ids, lease
--   tokens, acks json[], receipts json[], candidates text[], error codes, error refs, reasons)
--   is the same parse for the typed forms of the three functions (HP-2): the items arrive as
--   parallel arrays (the ones a call does not take are NULL) and are checked with the same
--   per-item problems in one statement; 22023 for the whole call when the arrays are not
--   one-dimensional and of one length or hold more than 1000 items, OB201 for a receipt holding
--   \u0000.
-- Callers: outbox.ack_deliveries, retry_deliveries, quarantine_deliveries (both forms); granted
--   to nobody.
CREATE OR REPLACE FUNCTION outbox._outcome_items(p_items json, p_call text)
 RETURNS outbox.outcome_items
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    r              outbox.outcome_items;
    v_fast         boolean;
    v_n            bigint;
    v_text_event   text[];
    v_text_attempt text[];
    v_text_token   text[];
BEGIN
    IF p_call = 'ack_deliveries' AND p_items IS NOT NULL AND pg_catalog.json_typeof(p_items) = 'array' THEN
        -- Fast form: the batch is the compact layout of internal/pgcall when the array's text
        -- equals the items rebuilt from the parsed columns and every id is a canonical UUID.
        BEGIN
            -- (one sort, in the subquery: the aggregates read its rows in input order)
            SELECT pg_catalog.count(*),
                   pg_catalog.btrim(p_items::text, E' \n\r\t') =
                       '[' || pg_catalog.string_agg(pg_catalog.format(
                                  '{"destination":%s,"eventId":%s,"attemptId":%s,"leaseToken":%s,"ack":%s,"receipt":%s%s}',
                                  pg_catalog.to_json(x.destination), pg_catalog.to_json(x.event_id), pg_catalog.to_json(x.attempt_id),
                                  pg_catalog.to_json(x.lease_token), x.ack, x.receipt,
                                  ',"receiptDigestCandidate":' || x.cand::text), ',') || ']'
                   AND pg_catalog.bool_and(x.cand IS NULL OR pg_catalog.json_typeof(x.cand) = 'string'),
                   pg_catalog.array_agg(x.ord::integer), pg_catalog.array_agg(x.destination),
                   pg_catalog.array_agg(x.event_id), pg_catalog.array_agg(x.attempt_id),
                   pg_catalog.array_agg(x.lease_token),
                   pg_catalog.array_agg(x.ack), pg_catalog.array_agg(x.receipt),
                   pg_catalog.array_agg(CASE WHEN pg_catalog.json_typeof(x.receipt) = 'object' THEN x.receipt::jsonb END),
                   pg_catalog.array_agg(x.cand::jsonb #>> '{}')
              INTO v_n, v_fast, r.ord, r.destination, v_text_event, v_text_attempt, v_text_token,
                   r.ack, r.receipt, r.receipt_jsonb, r.receipt_digest_candidate
              FROM (SELECT q.*
                      FROM ROWS FROM (pg_catalog.json_to_recordset(p_items)
                                      AS (destination text, "eventId" text, "attemptId" text, "leaseToken" text,
                                          ack json, receipt json, "receiptDigestCandidate" json))
                           WITH ORDINALITY AS q(destination, event_id, attempt_id, lease_token, ack, receipt, cand, ord)
                     ORDER BY q.ord) AS x;
            -- uuid_in raises on anything but a UUID; another accepted spelling (upper case, no
            -- hyphens) differs from its canonical text: both go to the generic parser
            r.event_id := v_text_event::uuid[];
            r.attempt_id := v_text_attempt::uuid[];
            r.lease_token := v_text_token::uuid[];
            v_fast := v_fast AND r.event_id::text[] = v_text_event AND r.attempt_id::text[] = v_text_attempt
                      AND r.lease_token::text[] = v_text_token;
        EXCEPTION WHEN OTHERS THEN
            v_fast := false; -- not in the fast form: the generic parser decides (and raises what it must)
        END;
        IF coalesce(v_fast, false) AND v_n <= 1000 THEN
            r.sqlstate := pg_catalog.array_fill(NULL::text, ARRAY[v_n::integer]);
            r.detail := r.sqlstate;
            RETURN r;
        END IF;
    END IF;

    -- Generic form: outbox._batch_items (shape, fence fields) plus the call's own members.
    SELECT pg_catalog.array_agg(x.ord), pg_catalog.array_agg(x.destination),
           pg_catalog.array_agg(x.event_id), pg_catalog.array_agg(x.attempt_id),
           pg_catalog.array_agg(x.lease_token),
           pg_catalog.array_agg(x.item->'ack'), pg_catalog.array_agg(x.item->'receipt'),
           pg_catalog.array_agg(CASE WHEN pg_catalog.jsonb_typeof(x.item_jsonb->'receipt') = 'object'
                                     THEN x.item_jsonb->'receipt' END),
           pg_catalog.array_agg(CASE WHEN pg_catalog.jsonb_typeof(x.item_jsonb->'receiptDigestCandidate') = 'string'
                                     THEN x.item_jsonb->>'receiptDigestCandidate' END),
           pg_catalog.array_agg(x.item_jsonb->>'errorCode'),
           pg_catalog.array_agg(outbox._dispatch_sanitize_ref(x.item_jsonb->>'errorRef')),
           pg_catalog.array_agg(x.item_jsonb->>'reason'),
           pg_catalog.array_agg(CASE WHEN x.problem IS NOT NULL THEN '22023' END),
           pg_catalog.array_agg(x.problem)
      INTO r.ord, r.destination, r.event_id, r.attempt_id, r.lease_token, r.ack, r.receipt, r.receipt_jsonb,
           r.receipt_digest_candidate, r.error_code, r.error_ref, r.reason, r.sqlstate, r.detail
      FROM (SELECT b.ord, b.item, b.item_jsonb, b.destination, b.event_id, b.attempt_id, b.lease_token,
                   coalesce(b.shape_problem, c.problem) AS problem
              FROM outbox._batch_items(p_items, p_call,
                                       CASE p_call
                                           WHEN 'ack_deliveries'
                                           THEN ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'ack', 'receipt', 'receiptDigestCandidate']
                                           WHEN 'retry_deliveries'
                                           THEN ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'errorCode', 'errorRef']
                                           ELSE ARRAY['destination', 'eventId', 'attemptId', 'leaseToken', 'reason', 'errorCode', 'errorRef'] END,
                                       ARRAY[]::text[]) AS b
              LEFT JOIN outbox.error_codes AS rc
                     ON p_call = 'quarantine_deliveries' AND rc.code = b.item_jsonb->>'reason' AND NOT rc.retryable
              LEFT JOIN outbox.error_codes AS ec
                     ON p_call <> 'ack_deliveries' AND ec.code = b.item_jsonb->>'errorCode'
             CROSS JOIN LATERAL (
                    SELECT CASE
                        WHEN b.shape_problem IS NOT NULL THEN NULL
                        WHEN p_call = 'ack_deliveries'
                        THEN CASE WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'receiptDigestCandidate') NOT IN ('string', 'null')
                                  THEN pg_catalog.format('item %s: receiptDigestCandidate must be a string', b.ord) END
                        WHEN p_call = 'quarantine_deliveries'
                             AND (pg_catalog.jsonb_typeof(b.item_jsonb->'reason') <> 'string' OR rc.code IS NULL)
                        THEN pg_catalog.format('reason %s is not a non-retryable code of outbox.error_codes', b.item_jsonb->'reason')
                        WHEN pg_catalog.jsonb_typeof(b.item_jsonb->'errorCode') <> 'string' OR ec.code IS NULL
                        THEN pg_catalog.format('error_code %s is not in outbox.error_codes', b.item_jsonb->'errorCode')
                        WHEN p_call = 'retry_deliveries' AND NOT ec.retryable
                        THEN pg_catalog.format('error_code %s is non-retryable: use quarantine_delivery', ec.code)
                        WHEN b.item_jsonb->'errorRef' IS NOT NULL AND pg_catalog.jsonb_typeof(b.item_jsonb->'errorRef') NOT IN ('string', 'null')
                        THEN 'errorRef must be a string'
                    END AS problem
                  ) AS c
             ORDER BY b.ord) AS x;
    RETURN r;
END
$function$;

COMMENT ON FUNCTION outbox._outcome_items(json, text) IS
    'Private: the one parse of an ack/retry/quarantine batch into outbox.outcome_items (typed parallel arrays in input order, per-item 22023 problems); one call per batch (SPEC R-AK-9, HP-1, HP-2).';

REVOKE ALL ON FUNCTION outbox._outcome_items(json, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION outbox._outcome_items(p_call text, p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[], p_lease_tokens uuid[], p_acks json[], p_receipts json[], p_receipt_digest_candidates text[], p_error_codes text[], p_error_refs text[], p_reasons text[])
 RETURNS outbox.outcome_items
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    r   outbox.outcome_items;
    v_n integer := pg_catalog.cardinality(p_destinations);
BEGIN
    -- the typed form (HP-2): every array one-dimensional and of the batch's length (an optional
    -- one may be NULL: every item NULL); the arrays a call does not take must be NULL
    IF v_n IS NULL
       OR EXISTS (SELECT 1
                    FROM (VALUES (pg_catalog.array_ndims(p_destinations), pg_catalog.cardinality(p_destinations), true),
                                 (pg_catalog.array_ndims(p_event_ids), pg_catalog.cardinality(p_event_ids), true),
                                 (pg_catalog.array_ndims(p_attempt_ids), pg_catalog.cardinality(p_attempt_ids), true),
                                 (pg_catalog.array_ndims(p_lease_tokens), pg_catalog.cardinality(p_lease_tokens), true),
                                 (pg_catalog.array_ndims(p_acks), pg_catalog.cardinality(p_acks), p_call = 'ack_deliveries'),
                                 (pg_catalog.array_ndims(p_receipts), pg_catalog.cardinality(p_receipts), p_call = 'ack_deliveries'),
                                 (pg_catalog.array_ndims(p_receipt_digest_candidates), pg_catalog.cardinality(p_receipt_digest_candidates), false),
                                 (pg_catalog.array_ndims(p_error_codes), pg_catalog.cardinality(p_error_codes), p_call <> 'ack_deliveries'),
                                 (pg_catalog.array_ndims(p_error_refs), pg_catalog.cardinality(p_error_refs), false),
                                 (pg_catalog.array_ndims(p_reasons), pg_catalog.cardinality(p_reasons), p_call = 'quarantine_deliveries'))
                         AS a(ndims, n, required)
                   WHERE (a.n IS NULL AND a.required)
                      OR (a.n IS NOT NULL AND a.n <> v_n)
                      OR coalesce(a.ndims, 1) <> 1) THEN
        RAISE EXCEPTION '%: items must be parallel arrays of one length', p_call
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destinations, event ids, attempt ids, lease tokens and the outcome arrays must be one-dimensional and all hold %s elements', coalesce(v_n, 0));
    END IF;
    IF v_n > 1000 THEN
        RAISE EXCEPTION '%: too many items', p_call
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('%s items; at most 1000 per call', v_n);
    END IF;
    IF v_n = 0 THEN
        RETURN r; -- nothing to answer
    END IF;
    BEGIN
        -- one statement, no per-item function call but the errorRef sanitizer (an SQL function,
        -- inlined); the problems are those of the JSON form's generic parser for the same values
        SELECT pg_catalog.array_agg(x.ord::integer ORDER BY x.ord), pg_catalog.array_agg(x.dest ORDER BY x.ord),
               pg_catalog.array_agg(x.ev ORDER BY x.ord), pg_catalog.array_agg(x.att ORDER BY x.ord),
               pg_catalog.array_agg(x.tok ORDER BY x.ord),
               pg_catalog.array_agg(x.ack ORDER BY x.ord), pg_catalog.array_agg(x.rc ORDER BY x.ord),
               pg_catalog.array_agg(CASE WHEN pg_catalog.json_typeof(x.rc) = 'object' THEN x.rc::jsonb END ORDER BY x.ord),
               pg_catalog.array_agg(x.cand ORDER BY x.ord), pg_catalog.array_agg(x.code ORDER BY x.ord),
               pg_catalog.array_agg(outbox._dispatch_sanitize_ref(x.ref) ORDER BY x.ord),
               pg_catalog.array_agg(x.reason ORDER BY x.ord),
               pg_catalog.array_agg(CASE WHEN c.problem IS NOT NULL THEN '22023' END ORDER BY x.ord),
               pg_catalog.array_agg(c.problem ORDER BY x.ord)
          INTO r.ord, r.destination, r.event_id, r.attempt_id, r.lease_token, r.ack, r.receipt, r.receipt_jsonb,
               r.receipt_digest_candidate, r.error_code, r.error_ref, r.reason, r.sqlstate, r.detail
          FROM ROWS FROM (pg_catalog.unnest(p_destinations), pg_catalog.unnest(p_event_ids), pg_catalog.unnest(p_attempt_ids),
                          pg_catalog.unnest(p_lease_tokens), pg_catalog.unnest(p_acks), pg_catalog.unnest(p_receipts),
                          pg_catalog.unnest(p_receipt_digest_candidates), pg_catalog.unnest(p_error_codes),
                          pg_catalog.unnest(p_error_refs), pg_catalog.unnest(p_reasons))
               WITH ORDINALITY AS x(dest, ev, att, tok, ack, rc, cand, code, ref, reason, ord)
          LEFT JOIN outbox.error_codes AS rc
                 ON p_call = 'quarantine_deliveries' AND rc.code = x.reason AND NOT rc.retryable
          LEFT JOIN outbox.error_codes AS ec
                 ON p_call <> 'ack_deliveries' AND ec.code = x.code
         CROSS JOIN LATERAL (
                SELECT CASE
                    WHEN p_call = 'ack_deliveries' THEN NULL
                    WHEN p_call = 'quarantine_deliveries' AND rc.code IS NULL
                    THEN pg_catalog.format('reason %s is not a non-retryable code of outbox.error_codes', pg_catalog.to_json(x.reason))
                    WHEN ec.code IS NULL
                    THEN pg_catalog.format('error_code %s is not in outbox.error_codes', pg_catalog.to_json(x.code))
                    WHEN p_call = 'retry_deliveries' AND NOT ec.retryable
                    THEN pg_catalog.format('error_code %s is non-retryable: use quarantine_delivery', ec.code)
                END AS problem
              ) AS c;
    EXCEPTION WHEN untranslatable_character OR character_not_in_repertoire THEN
        -- a receipt holding \u0000: PostgreSQL's jsonb cannot read it (as for the JSON form)
        RAISE EXCEPTION '%: items are not canonicalizable', p_call
            USING ERRCODE = 'OB201', DETAIL = SQLERRM;
    END;
    RETURN r;
END
$function$;

COMMENT ON FUNCTION outbox._outcome_items(text, text[], uuid[], uuid[], uuid[], json[], json[], text[], text[], text[], text[]) IS
    'Private: the typed form of the outcome batch parse (HP-2): parallel arrays into outbox.outcome_items with the same per-item 22023 problems; 22023 for arrays of different lengths or more than 1000 items; one call per batch (SPEC R-AK-9, HP-1, HP-2).';

REVOKE ALL ON FUNCTION outbox._outcome_items(text, text[], uuid[], uuid[], uuid[], json[], json[], text[], text[], text[], text[]) FROM PUBLIC;

-- sql/functions/outbox/_quarantine_outcomes.sql
-- outbox._quarantine_outcomes(p_batch outbox.outcome_items)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (private, SPEC R-AK-9, HP-1, HP-2; the rule of outbox.quarantine_deliveries, whose header says what it does)
-- Purpose: judge and record one parsed batch of quarantine_deliveries: p_batch is the one parse of the batch
--   (outbox._outcome_items: from the JSON form or from the typed parallel arrays), items in
--   input order with their 22023 shape problems already in sqlstate/detail. Both public forms of
--   outbox.quarantine_deliveries call it once per batch, so the rule lives here once.
-- Caller: outbox.quarantine_deliveries (both forms); granted to nobody (it runs as the owner inside them).
CREATE OR REPLACE FUNCTION outbox._quarantine_outcomes(p_batch outbox.outcome_items)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_ord     integer[];
    v_dest    text[];
    v_event   uuid[];
    v_attempt uuid[];
    v_token   uuid[];
    v_reason  text[];
    v_code    text[];
    v_ref     text[];
    v_state   text[];
    v_detail  text[];
BEGIN
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.reason, p.error_code, p.error_ref,
           p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_reason, v_code, v_ref, v_state, v_detail
      FROM (SELECT (p_batch).*) AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);

    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord)
      INTO v_state, v_detail
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
           ) AS j;

    PERFORM outbox._quarantine_write(pg_catalog.array_agg(u.dest), pg_catalog.array_agg(u.ev), pg_catalog.array_agg(u.att),
                                     'non_retryable', pg_catalog.array_agg(u.reason),
                                     pg_catalog.array_agg(u.code), pg_catalog.array_agg(u.ref), v_now)
       FROM unnest(v_dest, v_event, v_attempt, v_reason, v_code, v_ref, v_state)
            AS u(dest, ev, att, reason, code, ref, state)
      WHERE u.state IS NULL
     HAVING pg_catalog.count(*) > 0;

    RETURN QUERY
    SELECT u.dest, u.ev, u.att, CASE WHEN u.state IS NULL THEN 'quarantined' ELSE 'rejected' END, u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_state, v_detail)
           AS u(ord, dest, ev, att, state, detail)
     ORDER BY u.ord;
END
$function$;

COMMENT ON FUNCTION outbox._quarantine_outcomes(outbox.outcome_items) IS
    'Private: the body of outbox.quarantine_deliveries for a parsed batch (outbox.outcome_items from either form: JSON or typed arrays); one call per batch (SPEC R-AK-9, HP-1, HP-2).';

REVOKE ALL ON FUNCTION outbox._quarantine_outcomes(outbox.outcome_items) FROM PUBLIC;

-- sql/functions/outbox/_retry_outcomes.sql
-- outbox._retry_outcomes(p_batch outbox.outcome_items)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (private, SPEC R-AK-9, HP-1, HP-2; the rule of outbox.retry_deliveries, whose header says what it does)
-- Purpose: judge and record one parsed batch of retry_deliveries: p_batch is the one parse of the batch
--   (outbox._outcome_items: from the JSON form or from the typed parallel arrays), items in
--   input order with their 22023 shape problems already in sqlstate/detail. Both public forms of
--   outbox.retry_deliveries call it once per batch, so the rule lives here once.
-- Caller: outbox.retry_deliveries (both forms); granted to nobody (it runs as the owner inside them).
CREATE OR REPLACE FUNCTION outbox._retry_outcomes(p_batch outbox.outcome_items)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
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
      FROM (SELECT (p_batch).*) AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);
    -- judge: fencing, then exhaustion by the policy
    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord),
           pg_catalog.array_agg(j.outcome ORDER BY j.ord)
      INTO v_state, v_detail, v_outcome
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail,
                   CASE WHEN u.state IS NOT NULL OR f.problem IS NOT NULL THEN 'rejected'
                        WHEN d.attempt_count - d.recovery_attempt_base >= coalesce(rp.max_attempts, dp.max_attempts)
                             AND u.code <> 'awaiting_revision' THEN 'quarantined'
                        ELSE 'pending' END AS outcome
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_code, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, code, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
              LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = u.dest
             CROSS JOIN outbox.outbox_retry_policy_default AS dp
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
             WHERE dp.destination = '*'
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
           available_at     = v_now + outbox._backoff_delay(
                                  ROW(ok.dest, coalesce(rp.base_delay, dp.base_delay), coalesce(rp.multiplier, dp.multiplier),
                                      coalesce(rp.max_delay, dp.max_delay), coalesce(rp.jitter, dp.jitter),
                                      coalesce(rp.max_attempts, dp.max_attempts), coalesce(rp.policy_version, dp.policy_version),
                                      coalesce(rp.updated_at, dp.updated_at))::outbox.outbox_retry_policies,
                                  d.attempt_count - d.recovery_attempt_base),
           lease_owner      = NULL,
           lease_token      = NULL,
           lease_expires_at = NULL,
           last_error_code  = ok.code,
           last_error_ref   = ok.ref
      FROM ok
      LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = ok.dest
     CROSS JOIN outbox.outbox_retry_policy_default AS dp
     WHERE d.destination = ok.dest AND d.event_id = ok.ev AND dp.destination = '*'
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
$function$;

COMMENT ON FUNCTION outbox._retry_outcomes(outbox.outcome_items) IS
    'Private: the body of outbox.retry_deliveries for a parsed batch (outbox.outcome_items from either form: JSON or typed arrays); one call per batch (SPEC R-AK-9, HP-1, HP-2).';

REVOKE ALL ON FUNCTION outbox._retry_outcomes(outbox.outcome_items) FROM PUBLIC;

-- sql/functions/outbox/ack_deliveries.sql
-- outbox.ack_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-1..4, R-AK-9, D-2, §12a HP-1..HP-4, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many ActiveConsumerAck@1 outcomes in one call and one transaction. p_items: a JSON array
--   (at most 1000) of {destination, eventId, attemptId, leaseToken, ack, receipt,
--   receiptDigestCandidate?}, parsed once by outbox._outcome_items. One row per item, in input
--   order: complete | not_complete | rejected with sqlstate and detail: 22023 (item shape), OB001
--   (fencing; a delivery named twice), OB002 (the ack rule, outbox._ack_problem). A rejected item
--   changes nothing. ONE statement judges every item by a cheap predicate; the full rule
--   (outbox._ack_item_problem) runs only for the items it rejects (HP-1). Plans: index lookups only
--   (HP-3). Time: clock_timestamp() once per call; publication (outbox._publish_events) its own.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable
--   (\u0000); OB002 publication finds an acknowledged delivery inconsistent with its event.
-- Caller: outbox_dispatcher (also through outbox.ack_delivery, a batch of one).
-- Typed form (HP-2): outbox.ack_deliveries(destinations text[], event_ids uuid[], attempt_ids uuid[],
--   lease_tokens uuid[], acks json[], receipts json[], receipt_digest_candidates text[]) - the
--   items as parallel arrays (element i of each = item i; the last array may be NULL), as
--   internal/pgcall sends them: no JSON document is parsed. Same checks, rule and result rows;
--   22023 for the whole call when the arrays differ in length or hold more than 1000 items.
-- Both forms run the rule in outbox._ack_outcomes, once per batch.
CREATE OR REPLACE FUNCTION outbox.ack_deliveries(p_items json)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the JSON form: parse once (outbox._outcome_items), then the rule (outbox._ack_outcomes)
    RETURN QUERY SELECT * FROM outbox._ack_outcomes(outbox._outcome_items(p_items, 'ack_deliveries'));
END
$function$;

COMMENT ON FUNCTION outbox.ack_deliveries(json) IS
    'Record many ActiveConsumerAck@1 outcomes in one transaction, each fenced and validated by the same rule as ack_delivery (one predicate per batch, the full rule only for rejected items); one row per item in input order: complete | not_complete | rejected (sqlstate, detail). Publication once per completed event. SPEC R-AK-9, D-2, HP-1.';

REVOKE ALL ON FUNCTION outbox.ack_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_deliveries(json) TO outbox_dispatcher;

CREATE OR REPLACE FUNCTION outbox.ack_deliveries(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[], p_lease_tokens uuid[], p_acks json[], p_receipts json[], p_receipt_digest_candidates text[])
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the typed form (HP-2): parallel arrays as internal/pgcall sends them, no JSON document to
    -- parse; the same checks per item (outbox._outcome_items) and the same rule
    RETURN QUERY SELECT * FROM outbox._ack_outcomes(outbox._outcome_items('ack_deliveries', p_destinations, p_event_ids,
                                                                        p_attempt_ids, p_lease_tokens, p_acks, p_receipts, p_receipt_digest_candidates, NULL, NULL, NULL));
END
$function$;

COMMENT ON FUNCTION outbox.ack_deliveries(text[], uuid[], uuid[], uuid[], json[], json[], text[]) IS
    'The typed form of ack_deliveries(json) (HP-2): the items as parallel arrays (element i of each = item i), the same checks, rule and result rows. 22023 when the arrays differ in length or hold more than 1000 items. SPEC R-AK-9, HP-2.';

REVOKE ALL ON FUNCTION outbox.ack_deliveries(text[], uuid[], uuid[], uuid[], json[], json[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.ack_deliveries(text[], uuid[], uuid[], uuid[], json[], json[], text[]) TO outbox_dispatcher;

-- sql/functions/outbox/quarantine_deliveries.sql
-- outbox.quarantine_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-6, R-AK-7, R-AK-9, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many non-retryable outcomes in one call and one transaction. p_items: a JSON array (at
--   most 1000) of {destination, eventId, attemptId, leaseToken, reason, errorCode, errorRef?},
--   parsed once by outbox._outcome_items: reason a non-retryable code of outbox.error_codes,
--   errorCode any code there, errorRef (sanitized) kept on the finish. One row per item in input
--   order: quarantined (non_retryable finish, terminal state, quarantine row with the event
--   digest) or rejected with sqlstate and detail: 22023 (shape, reason, code), OB001 (fencing; a
--   delivery named twice). Set-based: lock, judge, outbox._quarantine_write. Time:
--   clock_timestamp() once per call.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable.
-- Caller: outbox_dispatcher (also through outbox.quarantine_delivery, a batch of one).
-- Typed form (HP-2): outbox.quarantine_deliveries(destinations text[], event_ids uuid[], attempt_ids uuid[],
--   lease_tokens uuid[], reasons text[], error_codes text[], error_refs text[]) - the
--   items as parallel arrays (element i of each = item i; the last array may be NULL), as
--   internal/pgcall sends them: no JSON document is parsed. Same checks, rule and result rows;
--   22023 for the whole call when the arrays differ in length or hold more than 1000 items.
-- Both forms run the rule in outbox._quarantine_outcomes, once per batch.
CREATE OR REPLACE FUNCTION outbox.quarantine_deliveries(p_items json)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the JSON form: parse once (outbox._outcome_items), then the rule (outbox._quarantine_outcomes)
    RETURN QUERY SELECT * FROM outbox._quarantine_outcomes(outbox._outcome_items(p_items, 'quarantine_deliveries'));
END
$function$;

COMMENT ON FUNCTION outbox.quarantine_deliveries(json) IS
    'Record many non-retryable outcomes in one transaction, each fenced like quarantine_delivery; one row per item in input order: quarantined | rejected (sqlstate, detail). SPEC R-AK-6, R-AK-9.';

REVOKE ALL ON FUNCTION outbox.quarantine_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_deliveries(json) TO outbox_dispatcher;

CREATE OR REPLACE FUNCTION outbox.quarantine_deliveries(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[], p_lease_tokens uuid[], p_reasons text[], p_error_codes text[], p_error_refs text[])
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the typed form (HP-2): parallel arrays as internal/pgcall sends them, no JSON document to
    -- parse; the same checks per item (outbox._outcome_items) and the same rule
    RETURN QUERY SELECT * FROM outbox._quarantine_outcomes(outbox._outcome_items('quarantine_deliveries', p_destinations, p_event_ids,
                                                                        p_attempt_ids, p_lease_tokens, NULL, NULL, NULL, p_error_codes, p_error_refs, p_reasons));
END
$function$;

COMMENT ON FUNCTION outbox.quarantine_deliveries(text[], uuid[], uuid[], uuid[], text[], text[], text[]) IS
    'The typed form of quarantine_deliveries(json) (HP-2): the items as parallel arrays (element i of each = item i), the same checks, rule and result rows. 22023 when the arrays differ in length or hold more than 1000 items. SPEC R-AK-9, HP-2.';

REVOKE ALL ON FUNCTION outbox.quarantine_deliveries(text[], uuid[], uuid[], uuid[], text[], text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_deliveries(text[], uuid[], uuid[], uuid[], text[], text[], text[]) TO outbox_dispatcher;

-- sql/functions/outbox/retry_deliveries.sql
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
-- Typed form (HP-2): outbox.retry_deliveries(destinations text[], event_ids uuid[], attempt_ids uuid[],
--   lease_tokens uuid[], error_codes text[], error_refs text[]) - the
--   items as parallel arrays (element i of each = item i; the last array may be NULL), as
--   internal/pgcall sends them: no JSON document is parsed. Same checks, rule and result rows;
--   22023 for the whole call when the arrays differ in length or hold more than 1000 items.
-- Both forms run the rule in outbox._retry_outcomes, once per batch.
CREATE OR REPLACE FUNCTION outbox.retry_deliveries(p_items json)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the JSON form: parse once (outbox._outcome_items), then the rule (outbox._retry_outcomes)
    RETURN QUERY SELECT * FROM outbox._retry_outcomes(outbox._outcome_items(p_items, 'retry_deliveries'));
END
$function$;

COMMENT ON FUNCTION outbox.retry_deliveries(json) IS
    'Record many retryable outcomes in one transaction, each fenced like retry_delivery; one row per item in input order: pending | quarantined (retry_exhausted) | rejected (sqlstate, detail). awaiting_revision never exhausts. SPEC R-AK-5, R-AK-9.';

REVOKE ALL ON FUNCTION outbox.retry_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retry_deliveries(json) TO outbox_dispatcher;

CREATE OR REPLACE FUNCTION outbox.retry_deliveries(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[], p_lease_tokens uuid[], p_error_codes text[], p_error_refs text[])
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the typed form (HP-2): parallel arrays as internal/pgcall sends them, no JSON document to
    -- parse; the same checks per item (outbox._outcome_items) and the same rule
    RETURN QUERY SELECT * FROM outbox._retry_outcomes(outbox._outcome_items('retry_deliveries', p_destinations, p_event_ids,
                                                                        p_attempt_ids, p_lease_tokens, NULL, NULL, NULL, p_error_codes, p_error_refs, NULL));
END
$function$;

COMMENT ON FUNCTION outbox.retry_deliveries(text[], uuid[], uuid[], uuid[], text[], text[]) IS
    'The typed form of retry_deliveries(json) (HP-2): the items as parallel arrays (element i of each = item i), the same checks, rule and result rows. 22023 when the arrays differ in length or hold more than 1000 items. SPEC R-AK-9, HP-2.';

REVOKE ALL ON FUNCTION outbox.retry_deliveries(text[], uuid[], uuid[], uuid[], text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.retry_deliveries(text[], uuid[], uuid[], uuid[], text[], text[]) TO outbox_dispatcher;

RESET ROLE;
