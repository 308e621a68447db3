-- outbox.pause_destination_claims(p_destination text, p_reason text) RETURNS void
--   (public, SPEC §11b R-PV-2, §13)
-- Purpose: stop outbox.claim_deliveries from handing out the destination's deliveries (pending
--   ones stay pending; leases already handed out run to their end: ack, retry or expiry). Expired
--   leases of a paused destination are still recovered by a claim naming it (they become pending
--   and wait). Idempotent: pausing a paused destination keeps the first pause and its reason and
--   writes nothing. Each effective pause appends one outbox.destination_claim_pause_log row.
-- Locking: INSERT .. ON CONFLICT DO NOTHING on outbox.destination_claim_pauses (primary key).
-- SQLSTATEs: 22023 destination not registered, reason empty, NULL or longer than 500 characters.
-- Caller: outbox_projector (the cutover runbook) and outbox_operator (incident handling);
--   SECURITY DEFINER, neither has table privileges.
CREATE OR REPLACE FUNCTION outbox.pause_destination_claims(p_destination text, p_reason text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_reason IS NULL OR p_reason = '' OR pg_catalog.length(p_reason) > 500 THEN
        RAISE EXCEPTION 'pause destination claims: invalid reason'
            USING ERRCODE = '22023', DETAIL = 'reason is 1..500 characters';
    END IF;
    IF p_destination IS NULL OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS d WHERE d.destination = p_destination) THEN
        RAISE EXCEPTION 'pause destination claims: unknown destination'
            USING ERRCODE = '22023', DETAIL = pg_catalog.format('destination %L is not registered in outbox.delivery_destinations', p_destination);
    END IF;
    INSERT INTO outbox.destination_claim_pauses (destination, reason, paused_by)
    VALUES (p_destination, p_reason, session_user)
    ON CONFLICT (destination) DO NOTHING;
    IF FOUND THEN
        INSERT INTO outbox.destination_claim_pause_log (destination, action, reason, changed_by)
        VALUES (p_destination, 'pause', p_reason, session_user);
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox.pause_destination_claims(text, text) IS
    'Pause claims of a destination (claim_deliveries skips it), idempotent, audited in destination_claim_pause_log; 22023 unknown destination or bad reason. SPEC R-PV-2, §13. Caller: outbox_projector, outbox_operator.';

REVOKE ALL ON FUNCTION outbox.pause_destination_claims(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.pause_destination_claims(text, text) TO outbox_operator;
GRANT EXECUTE ON FUNCTION outbox.pause_destination_claims(text, text) TO outbox_projector;
