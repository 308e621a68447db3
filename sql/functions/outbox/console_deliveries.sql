-- outbox.console_deliveries(p_destination text, p_status text, p_after_created_at timestamptz,
--                           p_after_event_id uuid, p_limit integer)
-- RETURNS TABLE (destination text, event_id uuid, event_type text, status text,
--                created_at timestamptz, available_at timestamptz, attempt_count integer,
--                last_attempt_at timestamptz, last_error_code text, lease_owner text,
--                lease_expires_at timestamptz, delivered_at timestamptz)
-- (public, operator console, issue 25 item 2)
-- Purpose: one page of the deliveries of one destination in one state, oldest first by
--   (created_at, event_id), keyset-paginated (pass the last row's pair; both NULL for page one).
-- Cost: an index range scan of at most p_limit rows; never OFFSET.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: 22023 a NULL destination, an unknown state, only one half of the keyset cursor, or
--   a limit outside 1..500.
-- Design notes (plan): docs/read-model.md#outboxconsole_deliveries   Callers: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.console_deliveries(p_destination text, p_status text, p_after_created_at timestamp with time zone, p_after_event_id uuid, p_limit integer)
 RETURNS TABLE(destination text, event_id uuid, event_type text, status text, created_at timestamp with time zone, available_at timestamp with time zone, attempt_count integer, last_attempt_at timestamp with time zone, last_error_code text, lease_owner text, lease_expires_at timestamp with time zone, delivered_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_destination IS NULL OR p_status IS NULL
       OR p_status NOT IN ('pending', 'leased', 'quarantined', 'acknowledged') THEN
        RAISE EXCEPTION 'console_deliveries: a destination and a state (pending, leased, quarantined, acknowledged) are required'
            USING ERRCODE = '22023';
    END IF;
    IF (p_after_created_at IS NULL) <> (p_after_event_id IS NULL) THEN
        RAISE EXCEPTION 'console_deliveries: the cursor is (created_at, event_id) of the last row, both or neither'
            USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 500 THEN
        RAISE EXCEPTION 'console_deliveries: limit must be 1..500' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT d.destination, d.event_id, e.event_type, d.status, d.created_at, d.available_at, d.attempt_count,
                d.last_attempt_at, d.last_error_code, d.lease_owner, d.lease_expires_at, d.delivered_at
           FROM outbox.outbox_deliveries AS d
           JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
          WHERE d.destination = $1 AND d.status = %L %s
          ORDER BY d.created_at, d.event_id
          LIMIT $4',
        p_status,
        CASE WHEN p_after_created_at IS NULL THEN ''
             ELSE 'AND (d.created_at, d.event_id) > ($2, $3)' END)
    USING p_destination, p_after_created_at, p_after_event_id, p_limit;
END
$function$;

COMMENT ON FUNCTION outbox.console_deliveries(text, text, timestamp with time zone, uuid, integer) IS
    'Operator console: one keyset page (never OFFSET) of a destination''s deliveries in one state, oldest first by (created_at, event_id). 22023 bad state/cursor/limit. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.console_deliveries(text, text, timestamp with time zone, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_deliveries(text, text, timestamp with time zone, uuid, integer) TO outbox_auditor;
