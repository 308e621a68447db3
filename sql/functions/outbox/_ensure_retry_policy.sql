-- outbox._ensure_retry_policy(p_destination text) RETURNS void  (private, SPEC §2, D-5)
-- Purpose: insert the default retry policy of a destination if it has none: base 1 s,
--   multiplier 2, cap 5 min, jitter 0.2, max attempts 20. The history trigger records the insert.
--   Called by migration 006 for the destinations present then, by outbox.register_destination
--   for destinations registered later, and by outbox.retry_delivery as a last resort (so a
--   destination without a row still follows - and records - the default policy).
-- SQLSTATEs: 23503 when the destination is not registered (foreign key).
-- Caller: kernel functions running as outbox_owner; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._ensure_retry_policy(p_destination text)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    INSERT INTO outbox.outbox_retry_policies (destination, base_delay, multiplier, max_delay, jitter, max_attempts)
    VALUES (p_destination, interval '1 second', 2, interval '5 minutes', 0.2, 20)
    ON CONFLICT (destination) DO NOTHING
$function$;

COMMENT ON FUNCTION outbox._ensure_retry_policy(text) IS
    'Private: insert the default retry policy (1 s, x2, cap 5 min, jitter 0.2, 20 attempts) for a destination that has none (SPEC §2).';

REVOKE ALL ON FUNCTION outbox._ensure_retry_policy(text) FROM PUBLIC;
