-- outbox.preview_redelivery(p_destination text, p_event_id uuid)
-- RETURNS TABLE (destination text, event_id uuid, event_type text, consumer_name text,
--                status text, attempt_count integer, quarantine_reason text,
--                quarantined_at timestamptz, published boolean, would_change text)
-- (public, SPEC R-AK-10, §13)
-- Purpose: the impact preview of a controlled recovery: exactly one row saying what
--   outbox.redeliver_quarantined would do to this delivery, without changing anything; would_change
--   in plain language, or "nothing" with the reason it would refuse (OB602). Never payload content.
-- Locking: none (plain MVCC reads; redeliver_quarantined re-checks under the row lock).
-- SQLSTATEs: 22023 a NULL argument or no delivery for (destination, event_id).
-- Design notes: docs/operations.md#outboxpreview_redelivery
-- Callers: outbox_operator (before a recovery), outbox_auditor (read-only).
CREATE OR REPLACE FUNCTION outbox.preview_redelivery(p_destination text, p_event_id uuid)
 RETURNS TABLE(destination text, event_id uuid, event_type text, consumer_name text, status text, attempt_count integer, quarantine_reason text, quarantined_at timestamp with time zone, published boolean, would_change text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_d          outbox.outbox_deliveries;
    v_type       text;
    v_schema     text;
    v_q          outbox.outbox_quarantine;
    v_published  timestamptz;
    v_open       integer;
    v_total      integer;
    v_max        integer;
    v_recoveries integer;
    v_change     text;
BEGIN
    IF p_destination IS NULL OR p_event_id IS NULL THEN
        RAISE EXCEPTION 'preview_redelivery: destination and event_id are required'
            USING ERRCODE = '22023', DETAIL = 'pass the destination and the event id of one delivery';
    END IF;
    SELECT d.* INTO v_d
      FROM outbox.outbox_deliveries AS d
     WHERE d.destination = p_destination AND d.event_id = p_event_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'preview_redelivery: no such delivery'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('no delivery %s/%s', pg_catalog.left(p_destination, 200), p_event_id);
    END IF;
    SELECT e.event_type, e.schema_version INTO v_type, v_schema
      FROM outbox.outbox_events AS e WHERE e.event_id = p_event_id;
    SELECT p.published_at INTO v_published
      FROM outbox.outbox_publications AS p WHERE p.event_id = p_event_id;

    IF v_d.status <> 'quarantined' THEN
        v_change := pg_catalog.format(
            'nothing: the delivery is %s, not quarantined; outbox.redeliver_quarantined refuses it (OB602)%s',
            v_d.status,
            CASE v_d.status
                WHEN 'pending' THEN ' - it is already waiting for its next attempt'
                WHEN 'leased' THEN ' - an attempt is in flight'
                WHEN 'acknowledged' THEN ' - the consumer acknowledged it'
                ELSE '' END);
    ELSE
        SELECT q.* INTO v_q
          FROM outbox.outbox_quarantine AS q
         WHERE q.destination = p_destination AND q.event_id = p_event_id
         ORDER BY q.quarantine_id DESC
         LIMIT 1;
        SELECT pg_catalog.count(*) FILTER (WHERE d.status <> 'acknowledged'), pg_catalog.count(*)
          INTO v_open, v_total
          FROM outbox.outbox_deliveries AS d
         WHERE d.event_id = p_event_id AND d.mandatory;
        SELECT coalesce(rp.max_attempts, dp.max_attempts) INTO v_max
          FROM outbox.outbox_retry_policy_default AS dp
          LEFT JOIN outbox.outbox_retry_policies AS rp ON rp.destination = p_destination
         WHERE dp.destination = '*';
        SELECT pg_catalog.count(*) INTO v_recoveries
          FROM outbox.outbox_recoveries AS r
         WHERE r.destination = p_destination AND r.event_id = p_event_id;
        v_change := pg_catalog.format(
            're-deliver the original event %s (%s, schema %s, envelope sha256 %s, unchanged) to %s '
            '(consumer %s, expected receipt %s v%s%s) as attempt %s: quarantined -> pending, due now. '
            'The retry budget restarts: %s more attempts before it is quarantined again (retry_exhausted). '
            'Quarantine row %s (reason %s, since %s) gets acknowledged_at and the case id; one audit row is written%s. '
            'Publication: %s',
            p_event_id, v_type, v_schema, v_q.event_envelope_sha256, p_destination,
            v_d.consumer_name, v_d.expected_receipt_type, v_d.expected_receipt_schema_version,
            CASE WHEN v_d.required_projection_name IS NOT NULL
                 THEN pg_catalog.format(', projection %s v%s', v_d.required_projection_name, v_d.required_projection_version)
                 ELSE '' END,
            v_d.attempt_count + 1,
            coalesce(v_max::text, 'the policy''s max_attempts'),
            v_q.quarantine_id, v_q.reason, v_q.quarantined_at,
            CASE WHEN v_recoveries > 0 THEN pg_catalog.format(' (re-delivered %s time(s) before)', v_recoveries) ELSE '' END,
            CASE WHEN v_published IS NOT NULL
                 THEN pg_catalog.format('already published at %s; stays so with that time', v_published)
                 WHEN v_open = 1
                 THEN 'open; this is the event''s last unacknowledged delivery, so the event is published when it is acknowledged'
                 ELSE pg_catalog.format('open; %s of the event''s %s deliveries are not acknowledged', v_open, v_total) END);
    END IF;

    RETURN QUERY
    SELECT v_d.destination, v_d.event_id, v_type, v_d.consumer_name, v_d.status, v_d.attempt_count,
           v_q.reason, v_q.quarantined_at, v_published IS NOT NULL, v_change;
END
$function$;

COMMENT ON FUNCTION outbox.preview_redelivery(text, uuid) IS
    'Impact preview of a controlled recovery: one row - event, frozen consumer, status, attempts, current quarantine reason/time, published, would_change in plain language. Changes nothing. 22023 no such delivery. SPEC R-AK-10. Callers: outbox_operator, outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.preview_redelivery(text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.preview_redelivery(text, uuid) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.preview_redelivery(text, uuid) TO outbox_operator;
