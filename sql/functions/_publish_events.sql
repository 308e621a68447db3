-- outbox._publish_events(p_event_ids uuid[], p_now timestamptz) RETURNS uuid[]
-- (private, SPEC R-AK-3, R-AK-4, R-AK-9, T-5, §2 publication table)
-- Purpose: the publication function, set-based, called by ack_deliveries in the ack's transaction
--   with the events whose deliveries it just acknowledged. Returns the events of p_event_ids that
--   are published (now or before): every mandatory delivery acknowledged -> one row in
--   outbox.outbox_publications (CAS by primary key: inserted once, never changed). Events with
--   an open mandatory delivery stay unpublished ('not_complete' for the caller).
--   'invalid': raises OB002 when an acknowledged delivery of one of these events has ack fields
--   inconsistent with the event or its frozen member (only possible by tampering).
-- Locking: an event that, in this transaction's view, still has another mandatory delivery open
--   is locked (FOR NO KEY UPDATE, in event_id order) BEFORE the deliveries are counted in a new
--   statement: two transactions acknowledging the last two deliveries of one event serialize and
--   the second sees the first's ack (READ COMMITTED), so an event can never stay unpublished
--   once all its mandatory deliveries are acknowledged. An event whose other deliveries are all
--   acknowledged already (or that has one delivery) needs no lock. Lock order everywhere:
--   deliveries, then events.
-- Immutability: the publications trigger accepts an INSERT only while the transaction-local
--   setting pgoutbox.publishing is 'on' (set here around the INSERT) and only for events whose
--   mandatory deliveries are all acknowledged; UPDATE/DELETE/TRUNCATE are OB202 for everyone.
-- Caller: outbox.ack_deliveries (as outbox_owner); granted to nobody.
CREATE FUNCTION outbox._publish_events(p_event_ids uuid[], p_now timestamptz)
RETURNS uuid[]
LANGUAGE plpgsql
VOLATILE
-- search_path: not SET here on purpose - a SET clause costs a GUC save/restore on every call;
-- this private helper runs only inside the pinned search_path of its SECURITY DEFINER callers and
-- schema-qualifies everything.
AS $fn$
DECLARE
    v_bad      record;
    v_complete uuid[];
BEGIN
    IF p_event_ids IS NULL OR pg_catalog.cardinality(p_event_ids) = 0 THEN
        RETURN '{}'::uuid[];
    END IF;

    PERFORM 1
       FROM outbox.outbox_events AS e
      WHERE e.event_id = ANY (p_event_ids)
        AND NOT EXISTS (SELECT 1 FROM outbox.outbox_publications AS p WHERE p.event_id = e.event_id)
        AND EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                     WHERE d.event_id = e.event_id AND d.mandatory AND d.status <> 'acknowledged')
      ORDER BY e.event_id
        FOR NO KEY UPDATE OF e;

    SELECT d.destination, d.event_id INTO v_bad
      FROM outbox.outbox_deliveries AS d
      JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
     WHERE d.event_id = ANY (p_event_ids)
       AND d.status = 'acknowledged'
       AND (d.ack_event_envelope_sha256 IS DISTINCT FROM e.event_envelope_sha256
            OR d.ack_event_envelope_digest_algorithm_version IS DISTINCT FROM e.event_envelope_digest_algorithm_version
            OR d.ack_consumer_name IS DISTINCT FROM d.consumer_name
            OR d.ack_receipt_type IS DISTINCT FROM d.expected_receipt_type
            OR d.ack_receipt_schema_version IS DISTINCT FROM d.expected_receipt_schema_version
            OR d.ack_receipt_digest IS NULL)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ack rejected: publication invalid'
            USING ERRCODE = 'OB002',
                  DETAIL = pg_catalog.format('publication invalid: acknowledged delivery %s/%s does not match its event or frozen member',
                                             v_bad.destination, v_bad.event_id);
    END IF;

    SELECT pg_catalog.array_agg(u.event_id) INTO v_complete
      FROM (SELECT DISTINCT x.event_id FROM pg_catalog.unnest(p_event_ids) AS x(event_id)) AS u
     WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                        WHERE d.event_id = u.event_id AND d.mandatory AND d.status <> 'acknowledged');
    IF v_complete IS NULL THEN
        RETURN '{}'::uuid[];
    END IF;

    PERFORM pg_catalog.set_config('pgoutbox.publishing', 'on', true);
    INSERT INTO outbox.outbox_publications (event_id, published_at)
    SELECT u.event_id, p_now FROM pg_catalog.unnest(v_complete) AS u(event_id)
    ON CONFLICT (event_id) DO NOTHING;
    PERFORM pg_catalog.set_config('pgoutbox.publishing', '', true);
    RETURN v_complete;
END
$fn$;

COMMENT ON FUNCTION outbox._publish_events(uuid[], timestamptz) IS
    'Private: publication CAS for a set of events - a publication row once every mandatory delivery is acknowledged; OB002 when an ack is inconsistent (SPEC R-AK-4, R-AK-9).';
REVOKE ALL ON FUNCTION outbox._publish_events(uuid[], timestamptz) FROM PUBLIC;
