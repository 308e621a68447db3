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
