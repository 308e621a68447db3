-- mailbox.register_source(p_source text, p_hole_release_after interval, p_backfill_deadline interval,
--   p_start_after bigint DEFAULT 0, p_head_backoff_base interval DEFAULT '1 second',
--   p_head_backoff_cap interval DEFAULT '5 minutes', p_max_attempts integer DEFAULT 10)
-- RETURNS void  (public, SPEC §10, §13, D-5)
-- Purpose: register a mailbox source, insert-or-compare: the same parameters again are a no-op;
--   other parameters for a registered source are refused (a source's configuration is fixed;
--   register a new source name to change it). W starts at p_start_after. Creates the source's
--   (empty) pump holder row.
-- Bounds: hole_release_after and backfill_deadline 1 second..30 days; start_after >= 0;
--   head_backoff_base 1 millisecond..1 hour, head_backoff_cap base..1 day; max_attempts 1..1000.
-- Locking: INSERT ... ON CONFLICT DO NOTHING, then the existing row is compared.
-- SQLSTATEs: 22023 invalid source literal or parameter out of range, or the source is registered
--   with other parameters.
-- Caller: outbox_registrar.
CREATE OR REPLACE FUNCTION mailbox.register_source(p_source text, p_hole_release_after interval, p_backfill_deadline interval, p_start_after bigint DEFAULT 0, p_head_backoff_base interval DEFAULT '00:00:01'::interval, p_head_backoff_cap interval DEFAULT '00:05:00'::interval, p_max_attempts integer DEFAULT 10)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
DECLARE
    v_row mailbox.sources;
    v_bad text;
BEGIN
    IF p_source IS NULL OR p_source !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_source) > 200 THEN
        v_bad := pg_catalog.format('source %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_source);
    ELSIF p_hole_release_after IS NULL OR p_hole_release_after < interval '1 second' OR p_hole_release_after > interval '30 days' THEN
        v_bad := pg_catalog.format('hole_release_after %s is outside 1 second..30 days', p_hole_release_after);
    ELSIF p_backfill_deadline IS NULL OR p_backfill_deadline < interval '1 second' OR p_backfill_deadline > interval '30 days' THEN
        v_bad := pg_catalog.format('backfill_deadline %s is outside 1 second..30 days', p_backfill_deadline);
    ELSIF p_start_after IS NULL OR p_start_after < 0 THEN
        v_bad := pg_catalog.format('start_after %s must be >= 0', p_start_after);
    ELSIF p_head_backoff_base IS NULL OR p_head_backoff_base < interval '1 millisecond' OR p_head_backoff_base > interval '1 hour' THEN
        v_bad := pg_catalog.format('head_backoff_base %s is outside 1 millisecond..1 hour', p_head_backoff_base);
    ELSIF p_head_backoff_cap IS NULL OR p_head_backoff_cap < p_head_backoff_base OR p_head_backoff_cap > interval '1 day' THEN
        v_bad := pg_catalog.format('head_backoff_cap %s is outside head_backoff_base..1 day', p_head_backoff_cap);
    ELSIF p_max_attempts IS NULL OR p_max_attempts < 1 OR p_max_attempts > 1000 THEN
        v_bad := pg_catalog.format('max_attempts %s is outside 1..1000', p_max_attempts);
    END IF;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'register_source: invalid argument' USING ERRCODE = 'invalid_parameter_value', DETAIL = v_bad;
    END IF;

    INSERT INTO mailbox.sources AS s (source, hole_release_after, backfill_deadline, start_after, head_backoff_base,
                                      head_backoff_cap, max_attempts, watermark)
    VALUES (p_source, p_hole_release_after, p_backfill_deadline, p_start_after, p_head_backoff_base,
            p_head_backoff_cap, p_max_attempts, p_start_after)
    ON CONFLICT (source) DO NOTHING;
    IF FOUND THEN
        INSERT INTO mailbox.pump_holders (source) VALUES (p_source);
        RETURN;
    END IF;
    SELECT s.* INTO v_row FROM mailbox.sources AS s WHERE s.source = p_source;
    IF (v_row.hole_release_after, v_row.backfill_deadline, v_row.start_after, v_row.head_backoff_base,
        v_row.head_backoff_cap, v_row.max_attempts)
       IS DISTINCT FROM
       (p_hole_release_after, p_backfill_deadline, p_start_after, p_head_backoff_base, p_head_backoff_cap, p_max_attempts) THEN
        RAISE EXCEPTION 'register_source: source already registered with other parameters'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('source %s: hole_release_after %s, backfill_deadline %s, start_after %s, head_backoff %s..%s, max_attempts %s',
                                             p_source, v_row.hole_release_after, v_row.backfill_deadline, v_row.start_after,
                                             v_row.head_backoff_base, v_row.head_backoff_cap, v_row.max_attempts),
                  HINT = 'a source''s configuration is fixed at registration';
    END IF;
END
$function$;

COMMENT ON FUNCTION mailbox.register_source(text, interval, interval, bigint, interval, interval, integer) IS
    'Register a mailbox source (insert-or-compare); W starts at start_after. 22023 on invalid arguments or other parameters for a registered source. SPEC §10, §13.';

REVOKE ALL ON FUNCTION mailbox.register_source(text, interval, interval, bigint, interval, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.register_source(text, interval, interval, bigint, interval, interval, integer) TO outbox_registrar;
