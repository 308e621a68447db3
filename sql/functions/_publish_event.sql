-- outbox._publish_event(p_event_id uuid) RETURNS text  (private, SPEC R-AK-3, R-AK-4, T-5)
-- Purpose: the three-state publication function, called by outbox.ack_delivery in the ack's
--   transaction:
--   'invalid'      raises OB002 when the event is unknown or an acknowledged delivery's ack fields
--                  are inconsistent with the event or the frozen member (consumer, receipt type,
--                  schema version, envelope digest algorithm/sha, missing receipt digest);
--   'not_complete' some mandatory delivery of the event is not acknowledged: published_at stays
--                  NULL, the caller's ack commits;
--   'complete'     every mandatory delivery is acknowledged: CAS published_at NULL -> now once;
--                  an event already published returns 'complete' without writing.
-- Locking: the event row is locked (FOR NO KEY UPDATE) BEFORE the deliveries are counted, so two
--   transactions acknowledging the last two deliveries of one event serialize and the second one
--   (in a fresh READ COMMITTED snapshot) sees the first's ack: published_at can never stay NULL
--   after all mandatory deliveries are acknowledged. Lock order everywhere: delivery, then event.
-- Immutability: the events trigger allows published_at to change only NULL -> value while the
--   transaction-local setting pgoutbox.publishing_event equals this event id; it is set right
--   before the UPDATE and reset to '' right after.
-- Time: published_at = clock_timestamp() (>= the delivered_at of the last ack).
-- SQLSTATEs: OB002 (invalid).
-- Caller: outbox.ack_delivery (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._publish_event(p_event_id uuid)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_e       outbox.outbox_events;
    v_bad     record;
    v_open    bigint;
BEGIN
    SELECT e.* INTO v_e FROM outbox.outbox_events AS e WHERE e.event_id = p_event_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM outbox._ack_reject(pg_catalog.format('publication invalid: no event %s', p_event_id));
    END IF;

    SELECT d.destination INTO v_bad
      FROM outbox.outbox_deliveries AS d
     WHERE d.event_id = p_event_id
       AND d.status = 'acknowledged'
       AND (d.ack_event_envelope_sha256 IS DISTINCT FROM v_e.event_envelope_sha256
            OR d.ack_event_envelope_digest_algorithm_version IS DISTINCT FROM v_e.event_envelope_digest_algorithm_version
            OR d.ack_consumer_name IS DISTINCT FROM d.consumer_name
            OR d.ack_receipt_type IS DISTINCT FROM d.expected_receipt_type
            OR d.ack_receipt_schema_version IS DISTINCT FROM d.expected_receipt_schema_version
            OR d.ack_receipt_digest IS NULL)
     LIMIT 1;
    IF FOUND THEN
        PERFORM outbox._ack_reject(pg_catalog.format('publication invalid: acknowledged delivery %s/%s does not match its event or frozen member',
                                                     v_bad.destination, p_event_id));
    END IF;

    IF v_e.published_at IS NOT NULL THEN
        RETURN 'complete';
    END IF;

    SELECT pg_catalog.count(*) INTO v_open
      FROM outbox.outbox_deliveries AS d
     WHERE d.event_id = p_event_id AND d.mandatory AND d.status <> 'acknowledged';
    IF v_open > 0 THEN
        RETURN 'not_complete';
    END IF;

    PERFORM pg_catalog.set_config('pgoutbox.publishing_event', p_event_id::text, true);
    UPDATE outbox.outbox_events AS e
       SET published_at = pg_catalog.clock_timestamp()
     WHERE e.event_id = p_event_id AND e.published_at IS NULL;
    PERFORM pg_catalog.set_config('pgoutbox.publishing_event', '', true);
    RETURN 'complete';
END
$fn$;

COMMENT ON FUNCTION outbox._publish_event(uuid) IS
    'Private: publication CAS - not_complete while a mandatory delivery is not acknowledged, complete after published_at NULL->now() once, OB002 when an ack is inconsistent (SPEC R-AK-4).';
REVOKE ALL ON FUNCTION outbox._publish_event(uuid) FROM PUBLIC;
