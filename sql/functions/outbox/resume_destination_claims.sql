-- outbox.resume_destination_claims(p_destination text) RETURNS void  (public, SPEC §11b R-PV-2, §13)
-- Purpose: end a claim pause of the destination (outbox.pause_destination_claims); its pending
--   deliveries are claimable again at once. Idempotent: resuming a destination that is not
--   paused writes nothing. Each effective resume appends one destination_claim_pause_log row.
-- Locking: DELETE of the destination's outbox.destination_claim_pauses row (primary key).
-- SQLSTATEs: 22023 destination not registered.
-- Caller: outbox_projector and outbox_operator; SECURITY DEFINER (no table privileges).
CREATE OR REPLACE FUNCTION outbox.resume_destination_claims(p_destination text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_destination IS NULL OR NOT EXISTS (SELECT 1 FROM outbox.delivery_destinations AS d WHERE d.destination = p_destination) THEN
        RAISE EXCEPTION 'resume destination claims: unknown destination'
            USING ERRCODE = '22023', DETAIL = pg_catalog.format('destination %L is not registered in outbox.delivery_destinations', p_destination);
    END IF;
    DELETE FROM outbox.destination_claim_pauses AS p WHERE p.destination = p_destination;
    IF FOUND THEN
        INSERT INTO outbox.destination_claim_pause_log (destination, action, reason, changed_by)
        VALUES (p_destination, 'resume', NULL, session_user);
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox.resume_destination_claims(text) IS
    'End a claim pause of a destination, idempotent, audited in destination_claim_pause_log; 22023 unknown destination. SPEC R-PV-2, §13. Caller: outbox_projector, outbox_operator.';

REVOKE ALL ON FUNCTION outbox.resume_destination_claims(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.resume_destination_claims(text) TO outbox_operator;
GRANT EXECUTE ON FUNCTION outbox.resume_destination_claims(text) TO outbox_projector;
