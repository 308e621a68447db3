-- mailbox.acquire_pump(p_source text) RETURNS boolean  (public, SPEC R-MX-11, R-SEC-5, §13)
-- Purpose: make this session the single active pump of p_source. true when this session now
--   holds it (first acquisition, heartbeat, or takeover of a dead holder's row); false when
--   another live session holds it. The hold ends with the session. No advisory lock: the hold is
--   a row of mailbox.pump_holders (pid + backend_start), locked FOR UPDATE while deciding.
-- Time: heartbeat_at = clock_timestamp() on every successful call.
-- SQLSTATEs: 22023 invalid or unknown source; 42501 when this session's own backend_start is not
--   visible to outbox_owner (pg_read_all_stats not granted to outbox_owner, see HINT).
-- Design notes (why no advisory lock, liveness): docs/mailbox.md#mailboxacquire_pump
-- Caller: outbox_mailbox.
CREATE OR REPLACE FUNCTION mailbox.acquire_pump(p_source text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'mailbox', 'pg_temp'
AS $function$
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_holder  mailbox.pump_holders;
    v_mystart timestamptz;
BEGIN
    PERFORM mailbox._mailbox_source(p_source, false);
    SELECT a.backend_start INTO v_mystart FROM pg_catalog.pg_stat_activity AS a WHERE a.pid = pg_catalog.pg_backend_pid();
    IF v_mystart IS NULL THEN
        RAISE EXCEPTION 'acquire_pump: cannot identify this session'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'backend_start of this session is not visible to outbox_owner',
                  HINT = 'GRANT pg_read_all_stats TO outbox_owner (docs/mailbox.md)';
    END IF;
    SELECT h.* INTO v_holder FROM mailbox.pump_holders AS h WHERE h.source = p_source FOR UPDATE;
    IF v_holder.holder_pid IS NOT NULL
       AND NOT (v_holder.holder_pid = pg_catalog.pg_backend_pid() AND v_holder.holder_backend_start = v_mystart)
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity AS a
                    WHERE a.pid = v_holder.holder_pid AND a.backend_start = v_holder.holder_backend_start) THEN
        RETURN false;
    END IF;
    UPDATE mailbox.pump_holders AS h
       SET holder_pid = pg_catalog.pg_backend_pid(),
           holder_backend_start = v_mystart,
           holder_user = session_user,
           acquired_at = CASE WHEN h.holder_pid = pg_catalog.pg_backend_pid() AND h.holder_backend_start = v_mystart
                              THEN h.acquired_at ELSE v_now END,
           heartbeat_at = v_now
     WHERE h.source = p_source;
    RETURN true;
END
$function$;

COMMENT ON FUNCTION mailbox.acquire_pump(text) IS
    'Make this session the single pump of the source for the rest of the session (holder row: pid + backend_start, liveness from pg_stat_activity; no advisory lock); false when another live session holds it. SPEC R-MX-11, R-SEC-5.';

REVOKE ALL ON FUNCTION mailbox.acquire_pump(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mailbox.acquire_pump(text) TO outbox_mailbox;
