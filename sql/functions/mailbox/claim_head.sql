-- mailbox.claim_head(p_source text, p_worker text, p_lease interval)
-- RETURNS TABLE (msg_id bigint, message jsonb, attempt integer, lease_token uuid)
-- (public, SPEC R-MX-3, R-MX-4, §13)
-- Purpose: lease the single executable head of p_source (the smallest unfinished msg_id <= W),
--   if it is due; a head that is not due returns no row and nothing behind it is ever returned
--   (one FIFO head). attempt + 1 and a new lease token on every claim.
-- Cost: one index probe - O(1) whatever the history, so maintenance never starves the head.
-- Locking: the head row FOR UPDATE; the pump holder row FOR SHARE (OB403 guard).
-- Time: clock_timestamp() once per call.
-- SQLSTATEs: 22023 invalid or unknown source, worker not a literal, lease outside
--   1 second..1 hour; OB403 another session holds the pump.
-- Design notes: docs/mailbox.md#mailboxclaim_head
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.claim_head(p_source text, p_worker text, p_lease interval)
 RETURNS TABLE(msg_id bigint, message jsonb, attempt integer, lease_token uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now  timestamptz := pg_catalog.clock_timestamp();
    v_src  mailbox.sources;
    v_head mailbox.messages;
BEGIN
    v_src := mailbox._mailbox_source(p_source, false);
    IF p_worker IS NULL OR p_worker !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_worker) > 200 THEN
        RAISE EXCEPTION 'claim_head: invalid worker'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('worker %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_worker);
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'claim_head: invalid lease'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('lease %s is outside 1 second..1 hour', p_lease);
    END IF;
    PERFORM mailbox._mailbox_require_pump(p_source);

    SELECT m.* INTO v_head
      FROM mailbox.messages AS m
     WHERE m.source = p_source AND m.state IN ('pending', 'failed')
     ORDER BY m.msg_id
     LIMIT 1
       FOR UPDATE;
    IF NOT FOUND OR v_head.msg_id > v_src.watermark
       OR (v_head.lease_expires_at IS NOT NULL AND v_head.lease_expires_at > v_now)
       OR v_head.available_at > v_now THEN
        RETURN;
    END IF;

    RETURN QUERY
    UPDATE mailbox.messages AS m
       SET attempt = m.attempt + 1,
           lease_owner = p_worker,
           lease_token = pg_catalog.gen_random_uuid(),
           lease_expires_at = v_now + p_lease
     WHERE m.source = p_source AND m.msg_id = v_head.msg_id
    RETURNING m.msg_id, m.message, m.attempt, m.lease_token;
END
$function$;

COMMENT ON FUNCTION mailbox.claim_head(text, text, interval) IS
    'Lease the single executable head (smallest pending/failed msg_id <= W) when due; nothing behind it is ever returned. SPEC R-MX-3, R-MX-4.';

REVOKE ALL ON FUNCTION mailbox.claim_head(text, text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.claim_head(text, text, interval) TO outbox_mailbox;
