-- outbox.append_event(event json, canonical_text text DEFAULT NULL, event_envelope_sha256 text DEFAULT NULL,
--                     traceparent text DEFAULT NULL, tracestate text DEFAULT NULL)
-- Purpose: append one EventEnvelope@1 inside the caller's business transaction (SPEC §3.2): the
--   envelope is validated (D-3, R-AP-7), the ACTIVE delivery-set quartet is frozen on it (R-AP-1,
--   R-AP-2), envelope and jcs-sha256-v1 digest stored (R-AP-3, D-2), one pending delivery per
--   mandatory member (R-AP-4), proved at COMMIT (R-AP-5). It is outbox.append_events with a
--   one-element array: every rule lives there and in outbox._append_validate.
-- Trace context (R-DP-7): an optional W3C traceparent/tracestate stored beside the event, never in
--   the digested envelope (see append_events); invalid -> 22023.
-- Idempotence: the same eventId with the same digest returns the stored row; another digest is OB105.
-- Raises: OB103 no active definition / pair not applicable / no mandatory member; OB105 envelope
--   invalid (also larger than kernel_settings max_payload_bytes, default 1 MiB); OB201 not
--   canonicalizable (on the hot path also a canonical text that is not exactly canonical).
-- Design notes (digest paths, limits): docs/contract.md#outboxappend_event
-- Caller: outbox_producer.
CREATE OR REPLACE FUNCTION outbox.append_event(p_event json, p_canonical_text text DEFAULT NULL::text, p_event_envelope_sha256 text DEFAULT NULL::text, p_traceparent text DEFAULT NULL::text, p_tracestate text DEFAULT NULL::text)
 RETURNS TABLE(event_id uuid, event_envelope_sha256 text, delivery_count integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY
    SELECT a.event_id, a.event_envelope_sha256, a.delivery_count
      FROM outbox.append_events(pg_catalog.json_build_array(p_event),
                                ARRAY[p_canonical_text], ARRAY[p_event_envelope_sha256],
                                p_traceparent, p_tracestate) AS a;
END
$function$;

COMMENT ON FUNCTION outbox.append_event(json, text, text, text, text) IS
    'Append an EventEnvelope@1 with its frozen delivery set and pending deliveries: append_events with one element (SPEC §3.2, D-2). Optional W3C trace context stored beside the event (R-DP-7). Raises OB103, OB105, OB201, 22023. Caller: outbox_producer.';

REVOKE ALL ON FUNCTION outbox.append_event(json, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_event(json, text, text, text, text) TO outbox_producer;
