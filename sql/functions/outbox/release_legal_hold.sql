-- outbox.release_legal_hold(event_id uuid) RETURNS void
-- Purpose: release the active legal hold of an event (SPEC R-RT-1): the hold row gets
--   released_at = now() and released_by = session user, once (trigger
--   tg_outbox_legal_holds__release_only); the row stays as the audit of the hold.
-- Locking: the hold row (UPDATE).
-- SQLSTATEs: P0002 the event has no active hold.
-- Caller: outbox_retention.
CREATE OR REPLACE FUNCTION outbox.release_legal_hold(p_event_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    UPDATE outbox.legal_holds h
       SET released_at = pg_catalog.now(), released_by = session_user
     WHERE h.event_id = p_event_id AND h.released_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release_legal_hold: no active legal hold'
            USING ERRCODE = 'no_data_found', DETAIL = pg_catalog.format('event %s has no active legal hold', p_event_id);
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox.release_legal_hold(uuid) IS
    'Release the active legal hold of an event; the hold row stays as its audit (SPEC R-RT-1). Caller: outbox_retention.';

REVOKE ALL ON FUNCTION outbox.release_legal_hold(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.release_legal_hold(uuid) TO outbox_retention;
