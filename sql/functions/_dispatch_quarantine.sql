-- outbox._dispatch_quarantine(p_delivery outbox.outbox_deliveries, p_outcome text, p_reason text,
--                             p_error_code text, p_error_ref text, p_now timestamptz) RETURNS void
-- (private, SPEC R-AK-5, R-AK-6)
-- Purpose: the terminal quarantine transition shared by quarantine_delivery (outcome
--   non_retryable) and retry_delivery when max attempts is reached (outcome retryable, reason
--   retry_exhausted): append the finish of the current attempt (retry_disposition quarantined,
--   normalized_error_code p_error_code), set status quarantined with the lease cleared and
--   last_error_* set, insert the outbox_quarantine row with the event's envelope digest and the
--   attempt id. The caller has fenced and locked the delivery row.
-- SQLSTATEs: 23505 if the attempt already has a finish (cannot happen behind the fence).
-- Caller: outbox.quarantine_delivery, outbox.retry_delivery; granted to nobody.
CREATE FUNCTION outbox._dispatch_quarantine(p_delivery outbox.outbox_deliveries, p_outcome text, p_reason text,
                                            p_error_code text, p_error_ref text, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    INSERT INTO outbox.outbox_delivery_attempt_finishes
           (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code, sanitized_error_ref)
    VALUES (p_delivery.current_attempt_id, p_now, p_outcome, 'quarantined', p_error_code, p_error_ref);

    UPDATE outbox.outbox_deliveries AS d
       SET status           = 'quarantined',
           lease_owner      = NULL,
           lease_token      = NULL,
           lease_expires_at = NULL,
           last_error_code  = p_error_code,
           last_error_ref   = p_error_ref
     WHERE d.destination = p_delivery.destination AND d.event_id = p_delivery.event_id;

    INSERT INTO outbox.outbox_quarantine
           (destination, event_id, attempt_id, reason, event_envelope_digest_algorithm_version,
            event_envelope_sha256, quarantined_at)
    SELECT p_delivery.destination, e.event_id, p_delivery.current_attempt_id, p_reason,
           e.event_envelope_digest_algorithm_version, e.event_envelope_sha256, p_now
      FROM outbox.outbox_events AS e
     WHERE e.event_id = p_delivery.event_id;
END
$fn$;

COMMENT ON FUNCTION outbox._dispatch_quarantine(outbox.outbox_deliveries, text, text, text, text, timestamptz) IS
    'Private: finish the current attempt as quarantined, set the delivery quarantined and insert the quarantine row with the event digest (SPEC R-AK-6).';
REVOKE ALL ON FUNCTION outbox._dispatch_quarantine(outbox.outbox_deliveries, text, text, text, text, timestamptz) FROM PUBLIC;
