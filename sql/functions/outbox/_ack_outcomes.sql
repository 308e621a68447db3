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
