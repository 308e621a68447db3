-- mailbox._mailbox_fence_fail(p_source text, p_msg_id bigint, p_lease_token uuid, p_now timestamptz, p_call text)
-- RETURNS void  (private, SPEC R-MX-6, §13)
-- Purpose: called when an outcome's compare-and-set found no live leased head; raises the
--   precise error: OB402 for a row that is terminal, late or missing (an outcome for a row in
--   the wrong state), OB001 for a stale, expired or foreign lease token. Always raises.
-- Caller: complete_head, fail_head; granted to nobody.
CREATE OR REPLACE FUNCTION mailbox._mailbox_fence_fail(p_source text, p_msg_id bigint, p_lease_token uuid, p_now timestamp with time zone, p_call text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_row mailbox.messages;
BEGIN
    SELECT m.* INTO v_row FROM mailbox.messages AS m WHERE m.source = p_source AND m.msg_id = p_msg_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: mailbox outcome for a row in the wrong state', p_call
            USING ERRCODE = 'OB402', DETAIL = pg_catalog.format('source %s has no processing row %s', p_source, p_msg_id);
    END IF;
    IF v_row.state NOT IN ('pending', 'failed') THEN
        RAISE EXCEPTION '%: mailbox outcome for a row in the wrong state', p_call
            USING ERRCODE = 'OB402',
                  DETAIL = pg_catalog.format('processing row %s/%s is %s; terminal states never change (SPEC R-MX-6)', p_source, p_msg_id, v_row.state);
    END IF;
    RAISE EXCEPTION '%: fencing rejected', p_call
        USING ERRCODE = 'OB001',
              DETAIL = pg_catalog.format('processing row %s/%s: lease token %s is not the live lease (%s)', p_source, p_msg_id, p_lease_token,
                                         CASE WHEN v_row.lease_token IS NULL THEN 'not leased'
                                              WHEN v_row.lease_token IS DISTINCT FROM p_lease_token THEN 'another token'
                                              ELSE 'lease expired' END);
END
$function$;

COMMENT ON FUNCTION mailbox._mailbox_fence_fail(text, bigint, uuid, timestamp with time zone, text) IS
    'Private: raise OB402 (row missing/terminal/late) or OB001 (stale, expired or foreign lease) after a failed outcome CAS.';

REVOKE ALL ON FUNCTION mailbox._mailbox_fence_fail(text, bigint, uuid, timestamp with time zone, text) FROM PUBLIC;
