-- outbox.append_event(event json, canonical_text text DEFAULT NULL, event_envelope_sha256 text DEFAULT NULL)
-- Purpose: append one EventEnvelope@1 inside the caller's business transaction (SPEC §3.2): the
--   envelope is validated (D-3, R-AP-7, payload size limit), the ACTIVE delivery-set definition's
--   quartet is frozen on the event (R-AP-1, R-AP-2), the envelope and its jcs-sha256-v1 digest
--   are stored with the canonical text (R-AP-3, D-2), one pending delivery per mandatory member
--   is created (R-AP-4) and channel outbox_delivery is notified once per destination (delivered
--   on COMMIT). The deferred constraint triggers prove the delivery set at COMMIT (R-AP-5).
--   eventId and occurredAt may be omitted (generated) unless the canonical text is passed.
-- One rule set: this is outbox.append_events called with a one-element array; every check lives
--   there and in outbox._append_validate (see their headers for the full list and order).
-- Digest paths (D-2): without canonical_text the database canonicalizes the envelope itself;
--   with canonical_text and its digest (the producer library's hot path) the database checks
--   sha256(canonical_text) = digest, that the text is exactly the RFC 8785 form of a document the
--   slow path accepts (cheap checks, outbox._jcs_text_problem), and that it is the submitted
--   envelope; the full canonical re-check also runs in outbox.verify_event_digests(). Either way
--   the database never stores a digest it did not verify.
-- Idempotence: the same eventId appended again with the same digest returns the stored row
--   (nothing new is written); the same eventId with another digest is refused (OB105).
-- Limits: an event document larger than outbox.kernel_settings max_payload_bytes (default 1 MiB,
--   changed by the owner only) -> OB105.
-- Raises: OB103 no active definition / pair not applicable / no mandatory member;
--   OB105 envelope invalid (missing/unknown field, wrong type, refinement, size, caller digest
--   differs); OB201 not canonicalizable (duplicate key, unsafe number, nesting; on the hot path
--   also a canonical text that is not exactly canonical: whitespace, escapes, number forms,
--   member order).
-- Caller: outbox_producer.
CREATE FUNCTION outbox.append_event(
    p_event json,
    p_canonical_text text DEFAULT NULL,
    p_event_envelope_sha256 text DEFAULT NULL
) RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT a.event_id, a.event_envelope_sha256, a.delivery_count
      FROM outbox.append_events(pg_catalog.json_build_array(p_event),
                                ARRAY[p_canonical_text], ARRAY[p_event_envelope_sha256]) AS a;
END
$fn$;

COMMENT ON FUNCTION outbox.append_event(json, text, text) IS
    'Append an EventEnvelope@1 with its frozen delivery set and pending deliveries: append_events with one element (SPEC §3.2, D-2). Raises OB103, OB105, OB201. Caller: outbox_producer.';
REVOKE ALL ON FUNCTION outbox.append_event(json, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_event(json, text, text) TO outbox_producer;
