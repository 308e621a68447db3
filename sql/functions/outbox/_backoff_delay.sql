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
CREATE OR REPLACE FUNCTION outbox._backoff_delay(p_policy outbox.outbox_retry_policies, p_attempt_count integer)
 RETURNS interval
 LANGUAGE sql
AS $function$
    SELECT pg_catalog.make_interval(secs => (
               least(pg_catalog.date_part('epoch', p_policy.max_delay)::numeric,
                     pg_catalog.date_part('epoch', p_policy.base_delay)::numeric
                     * pg_catalog.power(p_policy.multiplier, least(greatest(coalesce(p_attempt_count, 1) - 1, 0), 1000)))
               * (1 + p_policy.jitter * (2 * pg_catalog.random()::numeric - 1)))::double precision)
$function$;

COMMENT ON FUNCTION outbox._backoff_delay(outbox.outbox_retry_policies, integer) IS
    'Private: least(max_delay, base_delay*multiplier^(attempt_count-1)) * (1 + jitter*(2*random()-1)) (SPEC R-AK-5).';

REVOKE ALL ON FUNCTION outbox._backoff_delay(outbox.outbox_retry_policies, integer) FROM PUBLIC;
