-- mailbox._mailbox_require_pump(p_source text) RETURNS void  (private, SPEC R-MX-11, R-SEC-5)
-- Purpose: the guard of every mutating mailbox function: while a live session holds the
--   source's pump (mailbox.acquire_pump), any other session is refused with OB403. A source
--   nobody holds (or whose holder session has ended) may be driven by any mailbox caller (tests,
--   a one-shot operator run); the pump itself always acquires first.
-- Locking: the holder row is read FOR SHARE, so an acquire_pump of another session (FOR UPDATE)
--   waits until this transaction ends: a mutation started without a holder never interleaves
--   with a new holder's work (INV-18: processing and sweeps are mutually exclusive). Row locks
--   only; no advisory lock (R-SEC-5: an outside role cannot take or block this lock because it
--   has no privilege on the table).
-- Liveness: the holder is this session when holder_pid = pg_backend_pid() (a dead earlier
--   session with the same pid is dead by definition: the pid is ours now); another pid is live
--   only if pg_stat_activity shows that pid with the recorded backend_start.
-- SQLSTATEs: OB403 another live session holds the pump of p_source.
-- Caller: the mailbox functions; granted to nobody.
CREATE OR REPLACE FUNCTION mailbox._mailbox_require_pump(p_source text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_pid   integer;
    v_start timestamptz;
BEGIN
    SELECT h.holder_pid, h.holder_backend_start INTO v_pid, v_start
      FROM mailbox.pump_holders AS h WHERE h.source = p_source FOR SHARE;
    IF v_pid IS NULL OR v_pid = pg_catalog.pg_backend_pid() THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity AS a WHERE a.pid = v_pid AND a.backend_start = v_start) THEN
        RAISE EXCEPTION 'mailbox pump lock not held by this session'
            USING ERRCODE = 'OB403',
                  DETAIL = pg_catalog.format('source %s is held by the live session pid %s (started %s)', p_source, v_pid, v_start),
                  HINT = 'only the session that holds the pump (mailbox.acquire_pump) may change this source while it runs';
    END IF;
END
$function$;

COMMENT ON FUNCTION mailbox._mailbox_require_pump(text) IS
    'Private: OB403 when another live session (pid + backend_start) holds the pump of the source (SPEC R-MX-11).';

REVOKE ALL ON FUNCTION mailbox._mailbox_require_pump(text) FROM PUBLIC;
