-- inbox.read_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_id uuid, p_event_envelope_sha256 text) RETURNS json  (public, SPEC R-CO-1, R-AK-8)
-- Purpose: the consumer's own first receipt for an event, so that a redelivery answers with the
--   SAME receipt document and ack it answered the first time, without applying again. Returns
--   the stored canonical receipt document, or NULL when this consumer/projection has no receipt
--   for the event. Read-only: it writes nothing, so the digest it compares is the caller's
--   (the consumer kit computes it from the bytes it received); inbox.record_receipt, which
--   writes, computes its own.
-- Locking: none (a plain read; READ COMMITTED callers see receipts committed before the call).
-- SQLSTATEs: 42501 the calling role is not bound to consumer_name (inbox.consumer_roles, R-SEC-5);
--   OB301 a receipt for this event id exists with a different envelope digest;
--   22023 invalid consumer/projection key or digest.
-- Caller: outbox_consumer, SECURITY DEFINER: it has no table grants.
CREATE OR REPLACE FUNCTION inbox.read_receipt(p_consumer_name text, p_projection_name text, p_projection_version integer, p_event_id uuid, p_event_envelope_sha256 text)
 RETURNS json
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
    v_sha                text;
    v_doc                text;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role
    IF p_event_id IS NULL OR p_event_envelope_sha256 IS NULL OR p_event_envelope_sha256 !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'inbox: event id and a 64 hex digit envelope digest are required' USING ERRCODE = '22023';
    END IF;
    SELECT r.event_envelope_sha256, r.receipt_document INTO v_sha, v_doc
      FROM inbox.inbox_receipts r
     WHERE r.consumer_name = p_consumer_name AND r.projection_name = v_projection_name
       AND r.projection_version = v_projection_version AND r.event_id = p_event_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_sha <> p_event_envelope_sha256 THEN
        RAISE EXCEPTION 'receipt conflict: event % was already received with a different envelope digest', p_event_id
            USING ERRCODE = 'OB301',
                  DETAIL = format('consumer %s projection %s@%s: recorded %s, now %s', p_consumer_name, v_projection_name,
                                  v_projection_version, v_sha, p_event_envelope_sha256),
                  HINT = 'same event id with different content: an integrity conflict, never retried (SPEC R-CO-1)';
    END IF;
    RETURN v_doc::json;
END
$function$;

COMMENT ON FUNCTION inbox.read_receipt(text, text, integer, uuid, text) IS
    'The stored canonical receipt document of a consumer/projection for an event (NULL when none); OB301 when recorded with a different envelope digest. SPEC R-CO-1, R-AK-8.';

REVOKE ALL ON FUNCTION inbox.read_receipt(text, text, integer, uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.read_receipt(text, text, integer, uuid, text) TO outbox_consumer;
