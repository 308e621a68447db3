-- outbox._publish_events(p_event_ids uuid[], p_now timestamptz) RETURNS uuid[]
-- (private, SPEC R-AK-3, R-AK-4, R-AK-9, T-5, HP-4, §2 publication table)
-- Purpose: the publication function, set-based, called by ack_deliveries in the ack's transaction:
--   returns the events of p_event_ids that are published (now or before). An event whose
--   mandatory deliveries are all acknowledged gets its one row in outbox.outbox_publications
--   (inserted once, never changed; published_at = clock_timestamp()); the others stay unpublished.
-- SQLSTATEs: OB002 an acknowledged delivery's ack fields are inconsistent with the event or its
--   frozen member (only possible by tampering).
-- Locking: events that may still have an open delivery FOR NO KEY UPDATE in event_id order;
--   lock order everywhere: deliveries, then events.
-- Design notes (locking, clock, immutability): docs/contract.md#outbox_publish_events
-- Caller: outbox.ack_deliveries (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._publish_events(p_event_ids uuid[], p_now timestamp with time zone)
 RETURNS uuid[]
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_bad      text;
    v_complete uuid[];
    v_open     uuid[];
    v_more     uuid[];
BEGIN
    IF p_event_ids IS NULL OR pg_catalog.cardinality(p_event_ids) = 0 THEN
        RETURN '{}'::uuid[];
    END IF;

    -- count every event's open mandatory and inconsistent acknowledged deliveries (one statement)
    SELECT pg_catalog.array_agg(c.event_id) FILTER (WHERE c.open_mandatory = 0),
           pg_catalog.array_agg(c.event_id ORDER BY c.event_id) FILTER (WHERE c.open_mandatory > 0),
           pg_catalog.min(c.bad)
      INTO v_complete, v_open, v_bad
      FROM (SELECT DISTINCT x.event_id FROM pg_catalog.unnest(p_event_ids) AS x(event_id)) AS u
     CROSS JOIN LATERAL (
            SELECT u.event_id,
                   pg_catalog.count(*) FILTER (WHERE d.mandatory AND d.status <> 'acknowledged') AS open_mandatory,
                   pg_catalog.min(d.destination || '/' || d.event_id::text)
                       FILTER (WHERE d.status = 'acknowledged'
                                 AND (d.ack_event_envelope_sha256 IS DISTINCT FROM e.event_envelope_sha256
                                      OR d.ack_event_envelope_digest_algorithm_version IS DISTINCT FROM e.event_envelope_digest_algorithm_version
                                      OR d.ack_consumer_name IS DISTINCT FROM d.consumer_name
                                      OR d.ack_receipt_type IS DISTINCT FROM d.expected_receipt_type
                                      OR d.ack_receipt_schema_version IS DISTINCT FROM d.expected_receipt_schema_version
                                      OR d.ack_receipt_digest IS NULL)) AS bad
              FROM outbox.outbox_deliveries AS d
              LEFT JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
             WHERE d.event_id = u.event_id
          ) AS c;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'ack rejected: publication invalid'
            USING ERRCODE = 'OB002',
                  DETAIL = pg_catalog.format('publication invalid: acknowledged delivery %s does not match its event or frozen member', v_bad);
    END IF;

    -- events with another mandatory delivery open in this view: lock, then count again
    IF v_open IS NOT NULL THEN
        PERFORM 1
           FROM outbox.outbox_events AS e
          WHERE e.event_id = ANY (v_open)
            AND NOT EXISTS (SELECT 1 FROM outbox.outbox_publications AS p WHERE p.event_id = e.event_id)
          ORDER BY e.event_id
            FOR NO KEY UPDATE OF e;
        SELECT pg_catalog.array_agg(u.event_id) INTO v_more
          FROM pg_catalog.unnest(v_open) AS u(event_id)
         WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                            WHERE d.event_id = u.event_id AND d.mandatory AND d.status <> 'acknowledged');
        v_complete := coalesce(v_complete, '{}'::uuid[]) || coalesce(v_more, '{}'::uuid[]);
    END IF;
    IF v_complete IS NULL OR pg_catalog.cardinality(v_complete) = 0 THEN
        RETURN '{}'::uuid[];
    END IF;

    -- the publications trigger accepts exactly this statement text from this function: keep it on one line, unchanged
    INSERT INTO outbox.outbox_publications (event_id, published_at) SELECT u.event_id, pg_catalog.clock_timestamp() FROM pg_catalog.unnest(v_complete) AS u(event_id) ON CONFLICT (event_id) DO NOTHING;
    RETURN v_complete;
END
$function$;

COMMENT ON FUNCTION outbox._publish_events(uuid[], timestamp with time zone) IS
    'Private: publication CAS for a set of events in one statement - a publication row (stamped with the clock at the publishing statement) once every mandatory delivery is acknowledged; OB002 when an ack is inconsistent (SPEC R-AK-4, R-AK-9, HP-4).';

REVOKE ALL ON FUNCTION outbox._publish_events(uuid[], timestamp with time zone) FROM PUBLIC;
