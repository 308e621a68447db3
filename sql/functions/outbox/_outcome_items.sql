-- outbox._outcome_items(p_items json, p_call text) RETURNS outbox.outcome_items, and the typed
--   overload outbox._outcome_items(p_call, destinations, event ids, attempt ids, lease tokens,
--   acks json[], receipts json[], candidates text[], error codes, error refs, reasons) (HP-2)
-- (private, SPEC R-AK-9, HP-1, HP-2; details in docs/contract.md "Batch outcomes")
-- Purpose: THE parse of an outcome batch for p_call = ack_deliveries | retry_deliveries |
--   quarantine_deliveries into outbox.outcome_items (typed parallel arrays in input order, each
--   item's 22023 problem in sqlstate/detail, errorRef sanitized). JSON: the fast form (one
--   json_to_recordset) for acks in internal/pgcall's layout, else the generic parser
--   outbox._batch_items. Typed: the arrays a call does not take are NULL; one statement.
-- One call per batch, never per item (HP-1). SQLSTATEs (whole call): 22023 not a JSON array,
--   arrays not one-dimensional and of one length, more than 1000 items; OB201 unreadable (\u0000).
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
