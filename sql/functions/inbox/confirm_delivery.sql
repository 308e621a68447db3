-- inbox.confirm_delivery(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_id uuid) RETURNS void  (public, SPEC R-CO-2, §13; issue 21 item 2)
-- Purpose: the last statement of the consumer kit's one-round-trip chain (inbox.accept_delivery,
--   the handler's domain statements, this): it passes only when the receipt of this
--   consumer/projection/event was inserted by the current transaction, so a chain whose
--   accept_delivery answered anything but 'new' (existing, gap, duplicate_revision) rolls back
--   with the handler's statements it already ran, and a chain whose receipt was written commits
--   it together with them (R-CO-2). The test is on the kernel's own row (its xmin is this
--   transaction's id), not on anything a caller could set.
-- Locking: none (reads the receipt row written by this transaction). Hot path (HP-1): key and
--   caller (inbox._inbox_caller_ok, inlined) are predicates of the probe; helpers run to raise.
-- SQLSTATEs: OB302 no receipt for the event was inserted by this transaction; 42501 caller not
--   bound to consumer_name; 22023 invalid consumer/projection key.
-- Caller: outbox_consumer (the consumer's bound role), SECURITY DEFINER: it has no table grants.
CREATE OR REPLACE FUNCTION inbox.confirm_delivery(p_consumer_name text, p_projection_name text, p_projection_version integer, p_event_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
BEGIN
    PERFORM FROM inbox.inbox_receipts AS r, inbox._inbox_caller_ok(p_consumer_name) AS cc  -- inlined (HP-1)
     WHERE cc.ok AND r.consumer_name = p_consumer_name AND r.projection_name = v_projection_name
       AND r.projection_version = v_projection_version AND r.event_id = p_event_id
       AND r.xmin = pg_catalog.pg_current_xact_id()::xid;
    IF FOUND THEN
        RETURN;
    END IF;
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role
    RAISE EXCEPTION 'delivery not recorded by this transaction'
        USING ERRCODE = 'OB302',
              DETAIL = pg_catalog.format('consumer %s projection %s@%s event %s: inbox.accept_delivery did not insert its receipt here',
                                         p_consumer_name, v_projection_name, v_projection_version, p_event_id),
              HINT = 'the chain rolls back; its accept_delivery outcome says why (existing, gap, duplicate_revision)';
END
$function$;

COMMENT ON FUNCTION inbox.confirm_delivery(text, text, integer, uuid) IS
    'Last step of the consumer kit''s one-round-trip chain: OB302 unless this transaction inserted the event''s receipt (rolls back a chain whose accept_delivery did not answer new). SPEC R-CO-2, §13.';

REVOKE ALL ON FUNCTION inbox.confirm_delivery(text, text, integer, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.confirm_delivery(text, text, integer, uuid) TO outbox_consumer;
