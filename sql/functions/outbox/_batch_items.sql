-- outbox._batch_items(p_items json, p_call text, p_keys text[], p_required text[])
-- RETURNS TABLE(ord, item, item_jsonb, destination, event_id, attempt_id, lease_token, shape_problem)
-- (private, SPEC R-AK-9)
-- Purpose: the one parser of outcome batches (ack_deliveries, retry_deliveries,
--   quarantine_deliveries). p_items must be a JSON array of at most 1000 items (else 22023 for
--   the whole call: nothing to answer item by item), and a document holding \u0000 anywhere is
--   OB201 for the whole call (PostgreSQL's json operators cannot read it). Each item comes back in input order with
--   its fence fields; shape_problem is the 22023 DETAIL when the item is not an object, has a
--   member outside p_keys or lacks one of p_required, or a fence field present is not a string
--   or not a UUID. A missing or null fence field is left NULL: the fencing rule answers it
--   (OB001 incomplete fence), exactly as for the one-row functions. Members are read with the json (not jsonb) operators so documents inside an item
--   keep their text (duplicate keys stay detectable): item is the json text, item_jsonb the
--   same item parsed once (for cheap member access; the json operators re-parse on every use).
-- Caller: the batch outcome functions; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._batch_items(p_items json, p_call text, p_keys text[], p_required text[])
 RETURNS TABLE(ord integer, item json, item_jsonb jsonb, destination text, event_id uuid, attempt_id uuid, lease_token uuid, shape_problem text)
 LANGUAGE plpgsql
 STABLE
AS $function$
#variable_conflict use_column
BEGIN
    IF p_items IS NULL OR pg_catalog.json_typeof(p_items) <> 'array' THEN
        RAISE EXCEPTION '%: items must be a JSON array', p_call
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('got %s', coalesce(pg_catalog.json_typeof(p_items), 'NULL'));
    END IF;
    IF pg_catalog.json_array_length(p_items) > 1000 THEN
        RAISE EXCEPTION '%: too many items', p_call
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('%s items; at most 1000 per call', pg_catalog.json_array_length(p_items));
    END IF;
    -- The common case is decided by one cheap predicate per item (HP-1, HP-2): no member
    -- outside p_keys (jsonb minus the key list is empty), fence fields absent, null or strings
    -- (UUID-shaped for the three ids), no required member missing; only an item that fails it
    -- runs the query that names its first problem.
    RETURN QUERY
    SELECT x.ord::integer, x.item, x.jb, x.jb->>'destination',
           CASE WHEN x.jb->>'eventId' ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
                THEN (x.jb->>'eventId')::uuid END,
           CASE WHEN x.jb->>'attemptId' ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
                THEN (x.jb->>'attemptId')::uuid END,
           CASE WHEN x.jb->>'leaseToken' ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
                THEN (x.jb->>'leaseToken')::uuid END,
           CASE
               WHEN x.jb IS NULL THEN pg_catalog.format('item %s is not a JSON object', x.ord)
               WHEN x.jb - p_keys = '{}'::jsonb
                    AND coalesce(pg_catalog.jsonb_typeof(x.jb->'destination'), 'string') IN ('string', 'null')
                    AND (coalesce(pg_catalog.jsonb_typeof(x.jb->'eventId'), 'null') = 'null'
                         OR (pg_catalog.jsonb_typeof(x.jb->'eventId') = 'string'
                             AND x.jb->>'eventId' ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'))
                    AND (coalesce(pg_catalog.jsonb_typeof(x.jb->'attemptId'), 'null') = 'null'
                         OR (pg_catalog.jsonb_typeof(x.jb->'attemptId') = 'string'
                             AND x.jb->>'attemptId' ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'))
                    AND (coalesce(pg_catalog.jsonb_typeof(x.jb->'leaseToken'), 'null') = 'null'
                         OR (pg_catalog.jsonb_typeof(x.jb->'leaseToken') = 'string'
                             AND x.jb->>'leaseToken' ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'))
                    AND (pg_catalog.cardinality(p_required) = 0
                         OR NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_required) AS r(r)
                                         WHERE coalesce(pg_catalog.jsonb_typeof(x.jb->r.r), 'null') = 'null'))
                   THEN NULL
               ELSE (SELECT pg_catalog.format('item %s: %s', x.ord, p.msg)
                       FROM (SELECT pg_catalog.format('unknown member %s', k.k) AS msg, 1 AS o, k.k AS n
                               FROM pg_catalog.jsonb_object_keys(x.jb) AS k(k)
                              WHERE k.k <> ALL (p_keys)
                             UNION ALL
                             SELECT pg_catalog.format('missing member %s', r.r), 2, r.r
                               FROM pg_catalog.unnest(p_required) AS r(r)
                              WHERE coalesce(pg_catalog.jsonb_typeof(x.jb->r.r), 'null') = 'null'
                             UNION ALL
                             SELECT pg_catalog.format('%s must be a string', f.f), 3, f.f
                               FROM pg_catalog.unnest(ARRAY['destination', 'eventId', 'attemptId', 'leaseToken']) AS f(f)
                              WHERE pg_catalog.jsonb_typeof(x.jb->f.f) NOT IN ('string', 'null')
                             UNION ALL
                             SELECT pg_catalog.format('%s is not a UUID', f.f), 4, f.f
                               FROM pg_catalog.unnest(ARRAY['eventId', 'attemptId', 'leaseToken']) AS f(f)
                              WHERE pg_catalog.jsonb_typeof(x.jb->f.f) = 'string'
                                AND x.jb->>f.f !~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$') AS p
                      ORDER BY p.o, p.n LIMIT 1)
           END
      FROM pg_catalog.json_array_elements(p_items) WITH ORDINALITY AS e(item, ord)
     CROSS JOIN LATERAL (SELECT e.item, e.ord,
                                CASE WHEN pg_catalog.json_typeof(e.item) = 'object' THEN e.item::jsonb END AS jb
                         OFFSET 0) AS x
     ORDER BY x.ord;
EXCEPTION WHEN untranslatable_character OR character_not_in_repertoire OR invalid_text_representation THEN
    -- PostgreSQL's json operators cannot read a document holding \u0000 anywhere: no item can
    -- be told apart, so the whole call is refused (a caller retries its items one by one).
    RAISE EXCEPTION '%: items are not canonicalizable', p_call
        USING ERRCODE = 'OB201', DETAIL = SQLERRM;
END
$function$;

COMMENT ON FUNCTION outbox._batch_items(json, text, text[], text[]) IS
    'Private: parse an outcome batch (JSON array of at most 1000 items) into fence fields and a per-item 22023 shape problem (SPEC R-AK-9).';

REVOKE ALL ON FUNCTION outbox._batch_items(json, text, text[], text[]) FROM PUBLIC;
