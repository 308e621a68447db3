-- outbox.redeliver_quarantined(p_destination text, p_event_id uuid, p_case_id text, p_reason text,
--                              p_idempotency_key text) RETURNS TABLE (recovery_id uuid, status text)
-- (public, SPEC R-AK-10, §13: controlled manual recovery)
-- Purpose: the one way out of quarantine. Moves ONE quarantined delivery back to pending, due at
--   once: the same event, digest and frozen member; attempt history continues, the retry budget
--   restarts; the quarantine row gets the case; one immutable audit row in outbox.outbox_recoveries.
--   No skip, no forced success, no payload edit. Idempotent per key.
-- Locking: the delivery row FOR UPDATE, then its latest quarantine row FOR UPDATE.
-- SQLSTATEs: 22023 an argument is NULL or not a valid literal / reason, or the quarantine row is
--   already bound to another case; OB601 the key was used for another request; OB602 the
--   delivery does not exist or is not quarantined (DETAIL names its status).
-- Design notes (idempotency, arguments, audit row): docs/operations.md#outboxredeliver_quarantined
-- Caller: outbox_operator only.
CREATE OR REPLACE FUNCTION outbox.redeliver_quarantined(p_destination text, p_event_id uuid, p_case_id text, p_reason text, p_idempotency_key text)
 RETURNS TABLE(recovery_id uuid, status text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_reason text;
    v_prior  outbox.outbox_recoveries;
    v_d      outbox.outbox_deliveries;
    v_q      outbox.outbox_quarantine;
    v_now    timestamptz;
    v_id     uuid;
    v_pass   integer;
BEGIN
    -- arguments: bounded before any pattern is applied (R-SEC-5)
    IF p_destination IS NULL OR pg_catalog.length(p_destination) > 200 OR p_event_id IS NULL THEN
        RAISE EXCEPTION 'redeliver_quarantined: destination and event_id are required'
            USING ERRCODE = '22023', DETAIL = 'pass the destination (at most 200 characters) and the event id of one delivery';
    END IF;
    IF p_case_id IS NULL OR pg_catalog.length(p_case_id) > 128 OR p_case_id !~ '^[A-Za-z0-9][A-Za-z0-9._:/-]*$' THEN
        RAISE EXCEPTION 'redeliver_quarantined: case_id is not a valid literal'
            USING ERRCODE = '22023', DETAIL = 'case_id: 1-128 characters of [A-Za-z0-9._:/-], starting with a letter or digit';
    END IF;
    IF p_idempotency_key IS NULL OR pg_catalog.length(p_idempotency_key) > 128
       OR p_idempotency_key !~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$' THEN
        RAISE EXCEPTION 'redeliver_quarantined: idempotency_key is not a valid literal'
            USING ERRCODE = '22023', DETAIL = 'idempotency_key: 1-128 characters of [A-Za-z0-9._:-], starting with a letter or digit';
    END IF;
    IF p_reason IS NULL OR pg_catalog.length(p_reason) > 500 THEN
        RAISE EXCEPTION 'redeliver_quarantined: reason is required, at most 500 characters'
            USING ERRCODE = '22023', DETAIL = 'reason: free text for people (what was fixed, why it is safe), no payload content';
    END IF;
    v_reason := nullif(pg_catalog.btrim(pg_catalog.regexp_replace(
                    pg_catalog.regexp_replace(p_reason, '[[:cntrl:]]', ' ', 'g'), '\s+', ' ', 'g')), '');
    IF v_reason IS NULL THEN
        RAISE EXCEPTION 'redeliver_quarantined: reason is empty'
            USING ERRCODE = '22023', DETAIL = 'reason: free text for people (what was fixed, why it is safe), no payload content';
    END IF;

    -- idempotency, before the state: the first pass before the row lock, the second after it
    -- (a call with the same key may have committed while this one waited for the lock)
    FOR v_pass IN 1..2 LOOP
        SELECT r.* INTO v_prior FROM outbox.outbox_recoveries AS r WHERE r.idempotency_key = p_idempotency_key;
        IF FOUND THEN
            IF (v_prior.destination, v_prior.event_id, v_prior.case_id, v_prior.reason)
               IS DISTINCT FROM (p_destination, p_event_id, p_case_id, v_reason) THEN
                RAISE EXCEPTION 'recovery idempotency key already used for a different request'
                    USING ERRCODE = 'OB601',
                          DETAIL = pg_catalog.format('idempotency key %s was used by recovery %s (delivery %s/%s, case %s) at %s',
                                                     p_idempotency_key, v_prior.recovery_id, v_prior.destination,
                                                     v_prior.event_id, v_prior.case_id, v_prior.recovered_at),
                          HINT = 'use a new key for a new request; repeat a request only with exactly its arguments';
            END IF;
            RETURN QUERY SELECT v_prior.recovery_id, v_prior.after_status;
            RETURN;
        END IF;
        EXIT WHEN v_pass = 2;
        SELECT d.* INTO v_d
          FROM outbox.outbox_deliveries AS d
         WHERE d.destination = p_destination AND d.event_id = p_event_id
           FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'recovery refused: the delivery is not quarantined'
                USING ERRCODE = 'OB602',
                      DETAIL = pg_catalog.format('no delivery %s/%s', p_destination, p_event_id);
        END IF;
    END LOOP;

    IF v_d.status <> 'quarantined' THEN
        RAISE EXCEPTION 'recovery refused: the delivery is not quarantined'
            USING ERRCODE = 'OB602',
                  DETAIL = pg_catalog.format('delivery %s/%s is %s: only a quarantined delivery can be re-delivered%s',
                                             p_destination, p_event_id, v_d.status,
                                             CASE v_d.status
                                                 WHEN 'pending' THEN ' (it is already waiting for its next attempt)'
                                                 WHEN 'leased' THEN ' (an attempt is in flight)'
                                                 WHEN 'acknowledged' THEN ' (the consumer acknowledged it; nothing to recover)'
                                                 ELSE '' END);
    END IF;
    SELECT q.* INTO v_q
      FROM outbox.outbox_quarantine AS q
     WHERE q.destination = p_destination AND q.event_id = p_event_id
     ORDER BY q.quarantine_id DESC
     LIMIT 1
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'recovery refused: the delivery is not quarantined'
            USING ERRCODE = 'OB602',
                  DETAIL = pg_catalog.format('delivery %s/%s is quarantined but has no quarantine row', p_destination, p_event_id);
    END IF;
    IF v_q.case_id IS NOT NULL AND v_q.case_id <> p_case_id THEN
        RAISE EXCEPTION 'redeliver_quarantined: the quarantine is bound to another case'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('quarantine row %s of %s/%s belongs to case %s', v_q.quarantine_id,
                                             p_destination, p_event_id, v_q.case_id);
    END IF;

    v_now := pg_catalog.clock_timestamp();
    INSERT INTO outbox.outbox_recoveries
           (idempotency_key, destination, event_id, case_id, reason, requested_by,
            quarantine_id, quarantine_reason, quarantined_at,
            before_status, before_attempt_count, before_attempt_id, before_last_error_code,
            after_status, after_available_at, recovered_at)
    VALUES (p_idempotency_key, p_destination, p_event_id, p_case_id, v_reason, session_user,
            v_q.quarantine_id, v_q.reason, v_q.quarantined_at,
            v_d.status, v_d.attempt_count, v_d.current_attempt_id, v_d.last_error_code,
            'pending', v_now, v_now)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING recovery_id INTO v_id;
    IF v_id IS NULL THEN
        -- the key was taken meanwhile by a recovery of another delivery (this one is locked)
        SELECT r.* INTO v_prior FROM outbox.outbox_recoveries AS r WHERE r.idempotency_key = p_idempotency_key;
        RAISE EXCEPTION 'recovery idempotency key already used for a different request'
            USING ERRCODE = 'OB601',
                  DETAIL = pg_catalog.format('idempotency key %s was used by recovery %s (delivery %s/%s, case %s) at %s',
                                             p_idempotency_key, v_prior.recovery_id, v_prior.destination,
                                             v_prior.event_id, v_prior.case_id, v_prior.recovered_at);
    END IF;

    UPDATE outbox.outbox_quarantine AS q
       SET acknowledged_at = coalesce(q.acknowledged_at, v_now),
           case_id         = coalesce(q.case_id, p_case_id)
     WHERE q.quarantine_id = v_q.quarantine_id
       AND (q.acknowledged_at IS NULL OR q.case_id IS NULL);
    UPDATE outbox.outbox_deliveries AS d
       SET status                = 'pending',
           available_at          = v_now,
           recovery_attempt_base = d.attempt_count
     WHERE d.destination = p_destination AND d.event_id = p_event_id
       AND d.status = 'quarantined';
    -- wake the dispatchers of this destination (as append_events does)
    PERFORM pg_catalog.pg_notify('outbox_delivery', p_destination);

    RETURN QUERY SELECT v_id, 'pending'::text;
END
$function$;

COMMENT ON FUNCTION outbox.redeliver_quarantined(text, uuid, text, text, text) IS
    'Controlled recovery: one quarantined delivery back to pending (same event, digest, frozen member; attempts continue; budget restarts; due now), quarantine row gets acknowledged_at/case_id, one immutable audit row; idempotent per key (OB601 other request), OB602 not quarantined. SPEC R-AK-10. Caller: outbox_operator.';

REVOKE ALL ON FUNCTION outbox.redeliver_quarantined(text, uuid, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.redeliver_quarantined(text, uuid, text, text, text) TO outbox_operator;
