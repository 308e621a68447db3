-- Operator and auditor read-only views and stats (SPEC R-DP-4, R-DP-6, issue "Go dispatcher" §8).
-- Read-only by design: nothing here can skip, force-succeed or edit a delivery (seed 000, manual
-- disposition). The views run with the owner's rights, so outbox_auditor needs no table grant.
SET LOCAL ROLE outbox_owner;

-- Non-terminal rows per destination, for outbox.delivery_stats (cheap scrape: O(backlog)).
CREATE INDEX outbox_deliveries_stats_nonterminal
    ON outbox.outbox_deliveries (destination, status, created_at)
    WHERE status IN ('pending', 'leased');

{{ template "functions/delivery_stats.sql" . }}
{{ template "functions/active_delivery_set.sql" . }}

-- Per destination: counts by status, oldest undelivered (pending or leased) delivery and its
-- age, open quarantines. A full read of outbox_deliveries: an operator query (outboxctl status),
-- not a metrics scrape (that is outbox.delivery_stats).
CREATE VIEW outbox.delivery_status AS
SELECT dd.destination,
       dd.consumer_name,
       count(d.event_id) FILTER (WHERE d.status = 'pending')      AS pending,
       count(d.event_id) FILTER (WHERE d.status = 'leased')       AS leased,
       count(d.event_id) FILTER (WHERE d.status = 'acknowledged') AS acknowledged,
       count(d.event_id) FILTER (WHERE d.status = 'quarantined')  AS quarantined,
       min(d.created_at) FILTER (WHERE d.status IN ('pending', 'leased')) AS oldest_pending_at,
       COALESCE(GREATEST(EXTRACT(EPOCH FROM (now() - min(d.created_at) FILTER (WHERE d.status IN ('pending', 'leased')))), 0), 0)::double precision
           AS oldest_pending_age_seconds
FROM outbox.delivery_destinations dd
LEFT JOIN outbox.outbox_deliveries d ON d.destination = dd.destination
GROUP BY dd.destination, dd.consumer_name;
COMMENT ON VIEW outbox.delivery_status IS
    'Per-destination pending/leased/acknowledged/quarantined counts and oldest undelivered age (operator read, outboxctl status). Read-only.';

-- Quarantined deliveries, newest first, with their reason and the last error seen.
CREATE VIEW outbox.quarantined_deliveries AS
SELECT q.destination,
       q.event_id,
       e.event_type,
       e.schema_version,
       q.reason,
       d.last_error_code,
       d.attempt_count,
       q.quarantined_at,
       q.acknowledged_at,
       q.case_id
FROM outbox.outbox_quarantine q
JOIN outbox.outbox_deliveries d ON d.destination = q.destination AND d.event_id = q.event_id
JOIN outbox.outbox_events e ON e.event_id = q.event_id
ORDER BY q.quarantined_at DESC, q.destination, q.event_id;
COMMENT ON VIEW outbox.quarantined_deliveries IS
    'Quarantined deliveries with reason, last error code and attempt count, newest first (operator read, outboxctl status). Read-only.';

REVOKE ALL ON outbox.delivery_status, outbox.quarantined_deliveries FROM PUBLIC;
GRANT SELECT ON outbox.delivery_status, outbox.quarantined_deliveries TO outbox_auditor;

RESET ROLE;
