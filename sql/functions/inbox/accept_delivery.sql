-- inbox.accept_delivery(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_event_id uuid, p_event_envelope_sha256 text, p_aggregate_id text, p_aggregate_revision bigint,
--   p_event_envelope json, p_receipt json, p_receipt_digest_candidate text)
--   RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text, receipt_document json)
--   (public, SPEC R-CO-1..3, R-CO-2, §13; issue 21 item 2)
-- Purpose: the consumer side of one delivery in ONE call (existing-receipt read, revision check,
--   receipt insert-or-compare), so the kit pipelines it with the handler's statements and
--   inbox.confirm_delivery in one transaction. Outcomes: new | existing | gap | duplicate_revision.
-- SQLSTATEs: 42501 caller not bound to consumer_name; OB301 same event id with a different
--   envelope digest; OB002 receipt invalid; OB105 envelope invalid; OB201 not canonical text on
--   the hot path; 22023 invalid key or digest.
-- Design notes (outcomes, locking): docs/contract.md#inboxaccept_delivery
-- Caller: outbox_consumer (the consumer's bound role), SECURITY DEFINER: it has no table grants.
CREATE OR REPLACE FUNCTION inbox.accept_delivery(p_consumer_name text, p_projection_name text, p_projection_version integer, p_event_id uuid, p_event_envelope_sha256 text, p_aggregate_id text, p_aggregate_revision bigint, p_event_envelope json, p_receipt json, p_receipt_digest_candidate text)
 RETURNS TABLE(outcome text, receipt_ref text, receipt_digest text, receipt_document json)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_doc     json;
    v_observe text;
    v_rec     record;
BEGIN
    -- Redelivery: the stored receipt in one read (OB301 when the digest differs).
    v_doc := inbox.read_receipt(p_consumer_name, p_projection_name, p_projection_version, p_event_id, p_event_envelope_sha256);
    IF v_doc IS NOT NULL THEN
        RETURN QUERY SELECT 'existing'::text, NULL::text, NULL::text, v_doc;
        RETURN;
    END IF;
    IF p_aggregate_revision IS NOT NULL THEN
        v_observe := inbox.observe_revision(p_consumer_name, p_projection_name, p_projection_version,
                                            p_aggregate_id, p_aggregate_revision);
        IF v_observe = 'gap' THEN
            RETURN QUERY SELECT 'gap'::text, NULL::text, NULL::text, NULL::json;
            RETURN;
        ELSIF v_observe = 'duplicate' THEN
            -- A concurrent delivery of the same event may have committed while we waited.
            v_doc := inbox.read_receipt(p_consumer_name, p_projection_name, p_projection_version, p_event_id, p_event_envelope_sha256);
            IF v_doc IS NOT NULL THEN
                RETURN QUERY SELECT 'existing'::text, NULL::text, NULL::text, v_doc;
            ELSE
                RETURN QUERY SELECT 'duplicate_revision'::text, NULL::text, NULL::text, NULL::json;
            END IF;
            RETURN;
        END IF;
    END IF;
    SELECT r.outcome, r.receipt_ref, r.receipt_digest INTO STRICT v_rec
      FROM inbox.record_receipt(p_consumer_name, p_projection_name, p_projection_version,
                                p_event_envelope, p_receipt, p_receipt_digest_candidate) AS r;
    IF v_rec.outcome = 'new' THEN
        RETURN QUERY SELECT 'new'::text, v_rec.receipt_ref, v_rec.receipt_digest, NULL::json;
        RETURN;
    END IF;
    -- A concurrent delivery inserted it first: answer with its document.
    v_doc := inbox.read_receipt(p_consumer_name, p_projection_name, p_projection_version, p_event_id, p_event_envelope_sha256);
    RETURN QUERY SELECT 'existing'::text, v_rec.receipt_ref, v_rec.receipt_digest, v_doc;
END
$function$;

COMMENT ON FUNCTION inbox.accept_delivery(text, text, integer, uuid, text, text, bigint, json, json, text) IS
    'One call per delivery (consumer kit hot path): existing receipt read, revision check (ordered), receipt insert-or-compare: new | existing (stored document) | gap | duplicate_revision. SPEC R-CO-1..3, §13.';

REVOKE ALL ON FUNCTION inbox.accept_delivery(text, text, integer, uuid, text, text, bigint, json, json, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.accept_delivery(text, text, integer, uuid, text, text, bigint, json, json, text) TO outbox_consumer;
