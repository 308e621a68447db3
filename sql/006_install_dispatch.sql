-- Claim, lease fencing, attempts, ack, retry, quarantine, recovery, publication (SPEC §4, §5)
SET LOCAL ROLE outbox_owner;

-- Normalized error codes (SPEC R-AK-7): the closed list. Retryable codes send a delivery back to
-- pending (retry_delivery); non-retryable codes are the only quarantine reasons.
INSERT INTO outbox.error_codes (code, retryable, description) VALUES
    ('consumer_unavailable', true,  'the consumer could not be reached or answered unavailable'),
    ('consumer_timeout',     true,  'the consumer did not answer within the request timeout'),
    ('capacity_protection',  true,  'the consumer or the dispatcher shed load (429 / back-pressure)'),
    ('transport_error',      true,  'the transport failed (connection, protocol, broker)'),
    ('invalid_ack',          true,  'the consumer''s ack or receipt was rejected by ack_delivery (OB002)'),
    ('awaiting_revision',    true,  'the consumer waits for an earlier aggregate revision (gap)'),
    ('database_unavailable', true,  'a database needed for the delivery was unavailable'),
    ('unsupported_schema',   false, 'the consumer does not support this event schema version'),
    ('unknown_event_type',   false, 'the consumer does not know this event type'),
    ('digest_conflict',      false, 'the envelope digest does not match, or the same event id came with another digest'),
    ('envelope_invalid',     false, 'the envelope or payload violates an invariant'),
    ('receipt_conflict',     false, 'the consumer holds a receipt for this event with another digest (OB301)'),
    ('consumer_rejected',    false, 'the consumer rejected the event as never applicable'),
    ('retry_exhausted',      false, 'max attempts of the retry policy reached');

-- Claim indexes (SPEC R-CL-6): partial over non-terminal rows only, so terminal rows
-- (acknowledged, quarantined) never slow the claim down.
--   claimable: the claim's per-destination ordered scan (available_at, created_at, event_id).
CREATE INDEX outbox_deliveries_claimable
    ON outbox.outbox_deliveries (destination, available_at, created_at, event_id)
    WHERE status = 'pending';
--   leased: recovery of expired leases; the leased set is bounded by concurrency x batch.
CREATE INDEX outbox_deliveries_leased
    ON outbox.outbox_deliveries (lease_expires_at)
    WHERE status = 'leased';
--   open by aggregate: the per_aggregate ordering check (R-CL-7), "an earlier revision of the
--   same aggregate to the same destination is still pending or leased".
CREATE INDEX outbox_deliveries_open_by_aggregate
    ON outbox.outbox_deliveries (destination, aggregate_id, aggregate_revision)
    WHERE status IN ('pending', 'leased');
-- Attempt history of a delivery (auditors, tests): starts by delivery are covered by the unique
-- (destination, event_id, attempt_number); quarantine rows by attempt for the FK.
CREATE INDEX outbox_quarantine_attempt ON outbox.outbox_quarantine (attempt_id);

-- Private helpers (granted to nobody).
{{ template "functions/_dispatch_fence.sql" . }}
{{ template "functions/_dispatch_recover.sql" . }}
{{ template "functions/_dispatch_sanitize_ref.sql" . }}
{{ template "functions/_backoff_delay.sql" . }}
{{ template "functions/_ensure_retry_policy.sql" . }}

-- Public API (SPEC §13): EXECUTE to outbox_dispatcher only (granted in each file).
{{ template "functions/claim_deliveries.sql" . }}
{{ template "functions/renew_lease.sql" . }}
-- ack_delivery, retry_delivery, quarantine_delivery: installed by 009 (batches of one of the
-- batch outcome functions); this migration installed their first, one-row versions.
{{ template "functions/recover_expired_leases.sql" . }}
-- Operators: retry policy changes (EXECUTE to outbox_registrar).
{{ template "functions/set_retry_policy.sql" . }}

-- Immutability (SPEC R-SEC-3) and the versioned retry-policy history (D-5).
{{ template "triggers/outbox_delivery_attempt_starts__append_only.sql" . }}
{{ template "triggers/outbox_delivery_attempt_finishes__append_only.sql" . }}
{{ template "triggers/outbox_quarantine__append_only.sql" . }}
{{ template "triggers/outbox_retry_policy_history__append_only.sql" . }}
{{ template "triggers/outbox_retry_policies__history.sql" . }}

-- Default retry policies (SPEC §2): every destination registered so far has one (register_destination
-- inserts it; this catches any that do not), and the rows written before the history trigger
-- existed get their INSERT history row now.
SELECT outbox._ensure_retry_policy(dd.destination) FROM outbox.delivery_destinations AS dd;
INSERT INTO outbox.outbox_retry_policy_history
       (destination, policy_version, operation, base_delay, multiplier, max_delay, jitter, max_attempts, changed_by, changed_at)
SELECT rp.destination, rp.policy_version, 'INSERT', rp.base_delay, rp.multiplier, rp.max_delay, rp.jitter,
       rp.max_attempts, session_user, rp.updated_at
  FROM outbox.outbox_retry_policies AS rp
 WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_retry_policy_history AS h WHERE h.destination = rp.destination);

-- Grants (SPEC R-SEC-1): outbox_dispatcher has no table privilege at all - it acts only through
-- the SECURITY DEFINER functions above. The auditor reads attempts, quarantine and policies.
GRANT SELECT ON outbox.outbox_delivery_attempt_starts, outbox.outbox_delivery_attempt_finishes,
                outbox.outbox_quarantine, outbox.outbox_retry_policies, outbox.outbox_retry_policy_history,
                outbox.error_codes
    TO outbox_auditor;

RESET ROLE;
