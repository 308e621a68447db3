-- outbox.console_event_payload(p_event_id uuid) RETURNS jsonb
-- (public, operator console, issue 25 item 1; SPEC R-OP-4 "no payload is shown by default")
-- Purpose: the payload of one event in the hot tables, for the console's explicit "show payload"
--   request. Only outbox_auditor may call it (it may already read envelopes through the view
--   outbox.event_source, so this adds no exposure); the operator, dispatcher and every other
--   role may not. The console calls it only when it was started with -show-payloads and the
--   request asks for it. NULL for an unknown or archived event.
-- Cost: one primary-key lookup.
-- Locking: none (plain MVCC read).
-- SQLSTATEs: 22023 a NULL event id.
-- Callers: outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.console_event_payload(p_event_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_payload jsonb;
BEGIN
    IF p_event_id IS NULL THEN
        RAISE EXCEPTION 'console_event_payload: event_id is required' USING ERRCODE = '22023';
    END IF;
    SELECT e.event_payload INTO v_payload FROM outbox.outbox_events AS e WHERE e.event_id = p_event_id;
    RETURN v_payload;
END
$function$;

COMMENT ON FUNCTION outbox.console_event_payload(uuid) IS
    'Operator console: the payload of one event, only on explicit request (hidden by default). Caller: outbox_auditor only.';

REVOKE ALL ON FUNCTION outbox.console_event_payload(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.console_event_payload(uuid) TO outbox_auditor;
