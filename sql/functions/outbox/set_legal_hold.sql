-- outbox.set_legal_hold(event_id uuid, reason text) RETURNS void
-- Purpose: place a legal hold on an event (SPEC R-RT-1, R-RT-4): outbox.archive_events never
--   archives an event with an active hold. The hold row (outbox.legal_holds: reason, session
--   user, time; released once by outbox.release_legal_hold, never deleted) is its own audit.
--   Idempotent: an event that already has an active hold keeps it (first reason stays).
--   An archived event may be held too (the archive is immutable anyway; the hold records it).
-- Locking: FOR KEY SHARE on the hot event row, so a hold and an archive run of the same event
--   serialize (the run skips an event being held; the hold waits for a run that took it).
-- SQLSTATEs: 22023 reason empty or longer than 500 characters; P0002 unknown event id.
-- Caller: outbox_retention.
CREATE OR REPLACE FUNCTION outbox.set_legal_hold(p_event_id uuid, p_reason text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_reason IS NULL OR pg_catalog.btrim(p_reason) = '' OR pg_catalog.length(p_reason) > 500 THEN
        RAISE EXCEPTION 'set_legal_hold: reason must be a non-empty text of at most 500 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM outbox.outbox_events e WHERE e.event_id = p_event_id FOR KEY SHARE;
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM outbox.archived_events a WHERE a.event_id = p_event_id)
       AND NOT EXISTS (SELECT 1 FROM intake.observation_ids o WHERE o.observation_id = p_event_id) THEN
        RAISE EXCEPTION 'set_legal_hold: unknown event'
            USING ERRCODE = 'no_data_found', DETAIL = pg_catalog.format('%s is neither an event (hot or archived) nor an accepted observation', p_event_id);
    END IF;
    INSERT INTO outbox.legal_holds (event_id, reason, set_by)
    VALUES (p_event_id, p_reason, session_user)
    ON CONFLICT (event_id) WHERE released_at IS NULL DO NOTHING;
END
$function$;

COMMENT ON FUNCTION outbox.set_legal_hold(uuid, text) IS
    'Place an audited legal hold on an event or an accepted observation (by id); archive_events never archives a held event, purge_observation_payloads never purges a held observation (SPEC R-RT-1, R-OB-7). Caller: outbox_retention.';

REVOKE ALL ON FUNCTION outbox.set_legal_hold(uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.set_legal_hold(uuid, text) TO outbox_retention;
