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
--   1 <= multiplier <= 10, max_delay >= base_delay, 0 <= jitter < 1, 1 <= max_attempts <= 1000,
--   base_delay <= 1 hour and max_delay <= 1 day (R-SEC-5: no policy parks a delivery for years
--   or overflows the backoff arithmetic).
-- Caller: outbox_registrar (and outbox_owner).
CREATE OR REPLACE FUNCTION outbox.set_retry_policy(p_destination text, p_base_delay interval, p_multiplier numeric, p_max_delay interval, p_jitter numeric, p_max_attempts integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_version integer;
BEGIN
    IF p_destination IS DISTINCT FROM '*'
       AND NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS dd WHERE dd.destination = p_destination) THEN
        RAISE EXCEPTION 'set_retry_policy: unknown destination'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('destination %L is not registered', p_destination);
    END IF;
    IF p_base_delay IS NULL OR p_base_delay <= interval '0' OR p_base_delay > interval '1 hour'
       OR p_multiplier IS NULL OR p_multiplier < 1 OR p_multiplier > 10
       OR p_max_delay IS NULL OR p_max_delay < p_base_delay OR p_max_delay > interval '1 day'
       OR p_jitter IS NULL OR p_jitter < 0 OR p_jitter >= 1
       OR p_max_attempts IS NULL OR p_max_attempts < 1 OR p_max_attempts > 1000 THEN
        RAISE EXCEPTION 'set_retry_policy: value out of range'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('need 0 < base_delay <= 1 hour, 1 <= multiplier <= 10, base_delay <= max_delay <= 1 day, 0 <= jitter < 1, 1 <= max_attempts <= 1000; got (%s, %s, %s, %s, %s)',
                                             p_base_delay, p_multiplier, p_max_delay, p_jitter, p_max_attempts);
    END IF;

    IF p_destination = '*' THEN
        UPDATE outbox.outbox_retry_policy_default AS rp
           SET base_delay = p_base_delay, multiplier = p_multiplier, max_delay = p_max_delay,
               jitter = p_jitter, max_attempts = p_max_attempts
         WHERE rp.destination = '*'
        RETURNING rp.policy_version INTO v_version;
        RETURN v_version;
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
$function$;

COMMENT ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) IS
    'Insert or change a destination''s retry policy, or the default one with destination ''*'' (versioned, every change recorded in outbox_retry_policy_history); returns the policy_version. 22023 on unknown destination or out-of-range values. SPEC D-5.';

REVOKE ALL ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.set_retry_policy(text, interval, numeric, interval, numeric, integer) TO outbox_registrar;
