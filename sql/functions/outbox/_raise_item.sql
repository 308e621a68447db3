-- outbox._raise_item(p_call text, p_sqlstate text, p_detail text) RETURNS void  (private, SPEC R-AK-9)
-- Purpose: the one-row outcome functions (ack_delivery, retry_delivery, quarantine_delivery) are
--   batches of one; this turns the item's rejection into the exception those functions have
--   always raised: OB001 'fencing rejected', OB002 'ack rejected: <detail>', 22023 '<call>: ...',
--   each with the rule's DETAIL. Nothing happens when p_sqlstate is NULL.
-- Caller: the one-row outcome functions; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._raise_item(p_call text, p_sqlstate text, p_detail text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF p_sqlstate IS NULL THEN
        RETURN;
    ELSIF p_sqlstate = 'OB001' THEN
        RAISE EXCEPTION 'fencing rejected' USING ERRCODE = 'OB001', DETAIL = p_detail;
    ELSIF p_sqlstate = 'OB002' THEN
        RAISE EXCEPTION 'ack rejected: %', p_detail USING ERRCODE = 'OB002', DETAIL = p_detail;
    ELSE
        RAISE EXCEPTION '%: invalid argument', p_call USING ERRCODE = p_sqlstate, DETAIL = p_detail;
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox._raise_item(text, text, text) IS
    'Private: raise a batch item''s rejection as the one-row function''s exception (SPEC R-AK-9).';

REVOKE ALL ON FUNCTION outbox._raise_item(text, text, text) FROM PUBLIC;
