-- outbox.console_event_attempts(p_event_id uuid)
-- RETURNS TABLE (destination text, attempt_number integer, attempt_id uuid, worker text,
--                started_at timestamptz, finished_at timestamptz, outcome text,
--                retry_disposition text, error_code text, error_ref text)
-- (public, operator console, issue 25 item 1; SPEC R-CL, R-AK-5..8)
-- Purpose: the attempt history of every delivery of one event: each start (number, worker,
--   time) with its finish when there is one (time, outcome, retry disposition, normalized error
--   code, sanitized error ref); finish columns are NULL for an attempt in flight. Never the lease
--   token or the receipt body. In (destination, attempt_number) order.
-- Cost: the starts of the event's deliveries through the unique index (destination, event_id,
--   attempt_number), one primary-key lookup per finish.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL event id.
-- Callers: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.console_event_attempts(p_event_id uuid)
 RETURNS TABLE(destination text, attempt_number integer, attempt_id uuid, worker text, started_at timestamp with time zone, finished_at timestamp with time zone, outcome text, retry_disposition text, error_code text, error_ref text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_event_id IS NULL THEN
        RAISE EXCEPTION 'console_event_attempts: event_id is required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT s.destination, s.attempt_number, s.attempt_id, s.worker, s.started_at,
           f.finished_at, f.outcome, f.retry_disposition, f.normalized_error_code, f.sanitized_error_ref
      FROM outbox.outbox_deliveries AS d
      JOIN outbox.outbox_delivery_attempt_starts AS s
        ON s.destination = d.destination AND s.event_id = d.event_id
      LEFT JOIN outbox.outbox_delivery_attempt_finishes AS f ON f.attempt_id = s.attempt_id
     WHERE d.event_id = p_event_id
     ORDER BY s.destination, s.attempt_number;
END
$function$;

COMMENT ON FUNCTION outbox.console_event_attempts(uuid) IS
    'Operator console: every attempt start and finish of one event''s deliveries - worker, times, outcome, disposition, error code, sanitized ref; never a lease token or receipt body. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_event_attempts(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_event_attempts(uuid) TO outbox_auditor;
