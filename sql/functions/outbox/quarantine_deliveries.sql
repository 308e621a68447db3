-- outbox.quarantine_deliveries(p_items json) and its typed form (HP-2)
--   outbox.quarantine_deliveries(destinations text[], event_ids uuid[], attempt_ids uuid[],
--   lease_tokens uuid[], reasons text[], error_codes text[], error_refs text[])
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-6, R-AK-7, R-AK-9, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many non-retryable outcomes in one call and one transaction. JSON: an array (at most
--   1000) of {destination, eventId, attemptId, leaseToken, reason, errorCode, errorRef?}. Both
--   forms parse once (outbox._outcome_items) and run the rule once (outbox._quarantine_outcomes).
--   One row per item in input order: quarantined (non_retryable finish, quarantine row) or
--   rejected: 22023 (shape, reason, code), OB001 (fencing; a delivery named twice).
-- SQLSTATEs (whole call): 22023 not a JSON array, arrays of different lengths, more than 1000
--   items; OB201 unreadable.
-- Caller: outbox_dispatcher (also through outbox.quarantine_delivery, a batch of one).
CREATE OR REPLACE FUNCTION outbox.quarantine_deliveries(p_items json)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the JSON form: parse once (outbox._outcome_items), then the rule (outbox._quarantine_outcomes)
    RETURN QUERY SELECT * FROM outbox._quarantine_outcomes(outbox._outcome_items(p_items, 'quarantine_deliveries'));
END
$function$;

COMMENT ON FUNCTION outbox.quarantine_deliveries(json) IS
    'Record many non-retryable outcomes in one transaction, each fenced like quarantine_delivery; one row per item in input order: quarantined | rejected (sqlstate, detail). SPEC R-AK-6, R-AK-9.';

REVOKE ALL ON FUNCTION outbox.quarantine_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_deliveries(json) TO outbox_dispatcher;

CREATE OR REPLACE FUNCTION outbox.quarantine_deliveries(p_destinations text[], p_event_ids uuid[], p_attempt_ids uuid[], p_lease_tokens uuid[], p_reasons text[], p_error_codes text[], p_error_refs text[])
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- the typed form (HP-2): parallel arrays as internal/pgcall sends them, no JSON document to
    -- parse; the same checks per item (outbox._outcome_items) and the same rule
    RETURN QUERY SELECT * FROM outbox._quarantine_outcomes(outbox._outcome_items('quarantine_deliveries', p_destinations, p_event_ids,
                                                                        p_attempt_ids, p_lease_tokens, NULL, NULL, NULL, p_error_codes, p_error_refs, p_reasons));
END
$function$;

COMMENT ON FUNCTION outbox.quarantine_deliveries(text[], uuid[], uuid[], uuid[], text[], text[], text[]) IS
    'The typed form of quarantine_deliveries(json) (HP-2): the items as parallel arrays (element i of each = item i), the same checks, rule and result rows. 22023 when the arrays differ in length or hold more than 1000 items. SPEC R-AK-9, HP-2.';

REVOKE ALL ON FUNCTION outbox.quarantine_deliveries(text[], uuid[], uuid[], uuid[], text[], text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_deliveries(text[], uuid[], uuid[], uuid[], text[], text[], text[]) TO outbox_dispatcher;
