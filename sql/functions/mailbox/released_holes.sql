-- mailbox.released_holes(p_source text, p_within interval, p_max_ranges integer DEFAULT 1000)
-- RETURNS TABLE (first_id bigint, last_id bigint, released_at timestamptz)  (public, SPEC R-MX-2)
-- Purpose: the hole ranges of p_source released within p_within before now (newest first, at
--   most p_max_ranges): the pump re-reads these ids in the mailbox for a while, so a row that
--   commits inside a released hole is found and recorded as late (record_discovery), never
--   enqueued out of order silently. Read-only.
-- SQLSTATEs: 22023 invalid or unknown source, p_within outside 0..30 days, p_max_ranges outside
--   1..10000.
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.released_holes(p_source text, p_within interval, p_max_ranges integer DEFAULT 1000)
 RETURNS TABLE(first_id bigint, last_id bigint, released_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    IF p_within IS NULL OR p_within < interval '0' OR p_within > interval '30 days' THEN
        RAISE EXCEPTION 'released_holes: invalid window'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('within %s is outside 0..30 days', p_within);
    END IF;
    IF p_max_ranges IS NULL OR p_max_ranges < 1 OR p_max_ranges > 10000 THEN
        RAISE EXCEPTION 'released_holes: invalid max_ranges'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('max_ranges %s is outside 1..10000', p_max_ranges);
    END IF;
    RETURN QUERY
    SELECT h.first_id, h.last_id, h.released_at
      FROM mailbox.holes AS h
     WHERE h.source = p_source AND h.released_at IS NOT NULL
       AND h.released_at >= pg_catalog.clock_timestamp() - p_within
     ORDER BY h.released_at DESC, h.first_id
     LIMIT p_max_ranges;
END
$function$;

COMMENT ON FUNCTION mailbox.released_holes(text, interval, integer) IS
    'Hole ranges released within the window (newest first): the ids the pump re-reads to find late rows. SPEC R-MX-2.';

REVOKE ALL ON FUNCTION mailbox.released_holes(text, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.released_holes(text, interval, integer) TO outbox_mailbox;
