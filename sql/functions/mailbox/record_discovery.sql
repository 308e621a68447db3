-- mailbox.record_discovery(p_source text, p_messages json)
-- RETURNS TABLE (watermark bigint, enqueued integer, open_holes integer, released_holes integer)
-- (public, SPEC R-MX-2, R-MX-4, R-MX-5, §13)
-- Purpose: record mailbox rows the pump read with msg_id > W (plus re-read ids of released holes)
--   and, in this ONE transaction, enqueue them, age and release holes and move W (R-MX-2).
--   p_messages = [{msgId, receivedAt, message}], at most 10000. The processed mark is never read.
-- Locking: the source row FOR UPDATE; the pump holder row FOR SHARE (OB403 guard).
-- SQLSTATEs: 22023 invalid source or input, or an unknown id at or below W outside a released
--   hole; OB401 a known id (or the same id twice) with a different message; OB403 another
--   session holds the pump.
-- Design notes (the six steps, cost, jit): docs/mailbox.md#mailboxrecord_discovery
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.record_discovery(p_source text, p_messages json)
 RETURNS TABLE(watermark bigint, enqueued integer, open_holes integer, released_holes integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v_now       timestamptz := pg_catalog.clock_timestamp();
    v_src       mailbox.sources;
    v_w         bigint;
    v_new_w     bigint;
    v_bad       text;
    v_id        bigint;
    v_ids       bigint[];
    v_rats      timestamptz[];
    v_msgs      jsonb[];
    v_h_first   bigint[];
    v_h_last    bigint[];
    v_h_seen    timestamptz[];
    v_h_rel     boolean[];
    v_enqueued  integer;
    v_open      numeric;
    v_released  numeric;
    v_max_above bigint;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    PERFORM mailbox._mailbox_require_pump(p_source);
    v_src := mailbox._mailbox_source(p_source, true);
    v_w := v_src.watermark;

    -- 1. input shape (set-based: the first problem in input order)
    IF p_messages IS NULL OR pg_catalog.json_typeof(p_messages) <> 'array' THEN
        RAISE EXCEPTION 'record_discovery: messages must be a JSON array'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('got %s', coalesce(pg_catalog.json_typeof(p_messages), 'NULL'));
    END IF;
    IF pg_catalog.json_array_length(p_messages) > 10000 THEN
        RAISE EXCEPTION 'record_discovery: too many messages'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('%s elements; at most 10000 per call', pg_catalog.json_array_length(p_messages));
    END IF;
    SELECT pg_catalog.format('element %s: %s', e.i, e.problem) INTO v_bad
      FROM (SELECT x.i,
                   CASE
                       WHEN pg_catalog.json_typeof(x.v) <> 'object' THEN 'not an object'
                       WHEN (SELECT pg_catalog.count(*) <> pg_catalog.count(DISTINCT k) FROM pg_catalog.json_object_keys(x.v) AS k)
                           THEN 'duplicate member'
                       WHEN EXISTS (SELECT 1 FROM pg_catalog.json_object_keys(x.v) AS k WHERE k NOT IN ('msgId', 'receivedAt', 'message'))
                           THEN 'unknown member (allowed: msgId, receivedAt, message)'
                       WHEN pg_catalog.json_typeof(x.v -> 'msgId') IS DISTINCT FROM 'number'
                            OR (x.v ->> 'msgId') !~ '^[0-9]{1,19}$'
                            OR (x.v ->> 'msgId')::numeric > 9223372036854775807
                           THEN 'msgId must be an integer 0..9223372036854775807'
                       WHEN pg_catalog.json_typeof(x.v -> 'receivedAt') NOT IN ('null', 'string')
                            OR (pg_catalog.json_typeof(x.v -> 'receivedAt') = 'string'
                                AND (x.v ->> 'receivedAt') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$')
                           THEN 'receivedAt must be an RFC 3339 date-time or null'
                       WHEN x.v -> 'message' IS NULL THEN 'message is missing'
                   END AS problem
              FROM pg_catalog.json_array_elements(p_messages) WITH ORDINALITY AS x(v, i)) AS e
     WHERE e.problem IS NOT NULL
     ORDER BY e.i
     LIMIT 1;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'record_discovery: invalid message row' USING ERRCODE = 'invalid_parameter_value', DETAIL = v_bad;
    END IF;

    -- parsed, one entry per id (the same id twice must carry the same message)
    BEGIN
        SELECT p.id INTO v_id
          FROM (SELECT (x.v ->> 'msgId')::bigint AS id, (x.v -> 'message')::jsonb AS msg
                  FROM pg_catalog.json_array_elements(p_messages) AS x(v)) AS p
         GROUP BY p.id HAVING pg_catalog.count(DISTINCT p.msg) > 1
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'mailbox message conflict'
                USING ERRCODE = 'OB401', DETAIL = pg_catalog.format('msg_id %s appears twice in the input with different messages', v_id);
        END IF;
        SELECT pg_catalog.array_agg(d.id ORDER BY d.id), pg_catalog.array_agg(d.rat ORDER BY d.id),
               pg_catalog.array_agg(d.msg ORDER BY d.id)
          INTO v_ids, v_rats, v_msgs
          FROM (SELECT DISTINCT ON (p.id) p.id, p.rat, p.msg
                  FROM (SELECT (x.v ->> 'msgId')::bigint AS id, (x.v ->> 'receivedAt')::timestamptz AS rat,
                               (x.v -> 'message')::jsonb AS msg, x.i
                          FROM pg_catalog.json_array_elements(p_messages) WITH ORDINALITY AS x(v, i)) AS p
                 ORDER BY p.id, p.i) AS d;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format OR invalid_time_zone_displacement_value THEN
        RAISE EXCEPTION 'record_discovery: invalid receivedAt'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = SQLERRM;
    END;
    v_ids := coalesce(v_ids, '{}');

    -- 2. known ids: same message no-op, other message OB401; unknown ids <= W only in released holes
    SELECT i.id INTO v_id
      FROM unnest(v_ids, v_msgs) AS i(id, msg)
      JOIN mailbox.messages AS m ON m.source = p_source AND m.msg_id = i.id
     WHERE m.message <> i.msg
     ORDER BY i.id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'mailbox message conflict'
            USING ERRCODE = 'OB401',
                  DETAIL = pg_catalog.format('source %s msg_id %s is known with a different message; nothing recorded', p_source, v_id);
    END IF;
    SELECT i.id INTO v_id
      FROM pg_catalog.unnest(v_ids) AS i(id)
     WHERE i.id <= v_w
       AND NOT EXISTS (SELECT 1 FROM mailbox.messages AS m WHERE m.source = p_source AND m.msg_id = i.id)
       AND NOT coalesce((SELECT h.released_at IS NOT NULL AND h.last_id >= i.id
                           FROM mailbox.holes AS h
                          WHERE h.source = p_source AND h.first_id <= i.id
                          ORDER BY h.first_id DESC LIMIT 1), false)
     ORDER BY i.id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'record_discovery: unknown id at or below the watermark'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('source %s msg_id %s <= watermark %s is neither known nor in a released hole (below the source''s start?)',
                                             p_source, v_id, v_w);
    END IF;

    -- 3. enqueue (pending above W, late inside a released hole)
    WITH ins AS (
        INSERT INTO mailbox.messages AS m (source, msg_id, message, received_at, enqueued_at, state)
        SELECT p_source, i.id, i.msg, i.rat, v_now, CASE WHEN i.id <= v_w THEN 'late' ELSE 'pending' END
          FROM unnest(v_ids, v_rats, v_msgs) AS i(id, rat, msg)
        ON CONFLICT (source, msg_id) DO NOTHING
        RETURNING m.state
    )
    SELECT pg_catalog.count(*) FILTER (WHERE ins.state = 'pending') INTO v_enqueued FROM ins;

    -- 4. + 5. the holes among the rows above W, their first-seen times and releases
    WITH r AS (
        SELECT m.msg_id, pg_catalog.lag(m.msg_id, 1, v_w) OVER (ORDER BY m.msg_id) AS prev
          FROM mailbox.messages AS m
         WHERE m.source = p_source AND m.msg_id > v_w
    ), gaps AS (
        SELECT r.prev + 1 AS first_id, r.msg_id - 1 AS last_id FROM r WHERE r.msg_id > r.prev + 1
    ), seen AS (
        SELECT g.first_id, g.last_id,
               coalesce((SELECT pg_catalog.min(h.first_seen_at) FROM mailbox.holes AS h
                          WHERE h.source = p_source AND h.released_at IS NULL
                            AND h.first_id <= g.last_id AND h.last_id >= g.first_id), v_now) AS first_seen_at
          FROM gaps AS g
    ), decided AS (
        SELECT s.first_id, s.last_id, s.first_seen_at,
               pg_catalog.bool_and(s.first_seen_at <= v_now - v_src.hole_release_after) OVER (ORDER BY s.first_id) AS release
          FROM seen AS s
    )
    SELECT pg_catalog.array_agg(d.first_id ORDER BY d.first_id), pg_catalog.array_agg(d.last_id ORDER BY d.first_id),
           pg_catalog.array_agg(d.first_seen_at ORDER BY d.first_id), pg_catalog.array_agg(d.release ORDER BY d.first_id),
           coalesce(pg_catalog.sum(d.last_id - d.first_id + 1) FILTER (WHERE NOT d.release), 0),
           coalesce(pg_catalog.sum(d.last_id - d.first_id + 1) FILTER (WHERE d.release), 0),
           pg_catalog.min(d.first_id) FILTER (WHERE NOT d.release)
      INTO v_h_first, v_h_last, v_h_seen, v_h_rel, v_open, v_released, v_new_w
      FROM decided AS d;

    DELETE FROM mailbox.holes AS h WHERE h.source = p_source AND h.released_at IS NULL;
    INSERT INTO mailbox.holes (source, first_id, last_id, first_seen_at, released_at)
    SELECT p_source, g.f, g.l, g.s, CASE WHEN g.rel THEN v_now END
      FROM unnest(v_h_first, v_h_last, v_h_seen, v_h_rel) AS g(f, l, s, rel);

    -- 6. W
    IF v_new_w IS NOT NULL THEN
        v_new_w := v_new_w - 1;
    ELSE
        SELECT pg_catalog.max(m.msg_id) INTO v_max_above FROM mailbox.messages AS m WHERE m.source = p_source AND m.msg_id > v_w;
        v_new_w := coalesce(v_max_above, v_w);
    END IF;
    UPDATE mailbox.sources AS s
       SET watermark = v_new_w,
           watermark_advanced_at = CASE WHEN v_new_w > v_w THEN v_now ELSE s.watermark_advanced_at END,
           last_discovery_at = v_now
     WHERE s.source = p_source;

    watermark := v_new_w;
    enqueued := v_enqueued;
    open_holes := least(v_open, 2147483647)::integer;
    released_holes := least(v_released, 2147483647)::integer;
    RETURN NEXT;
END
$function$;

COMMENT ON FUNCTION mailbox.record_discovery(text, json) IS
    'Enqueue mailbox rows read with msg_id > W and advance W over the contiguous prefix in one transaction; holes (ranges, our clock) are released after hole_release_after, skipping only hole ids; rows inside released holes are recorded as late. OB401 message conflict, 22023 invalid input, OB403 pump held elsewhere. SPEC R-MX-2, R-MX-4, R-MX-5.';

REVOKE ALL ON FUNCTION mailbox.record_discovery(text, json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.record_discovery(text, json) TO outbox_mailbox;
