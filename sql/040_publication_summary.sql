-- outbox.publication_summary() for outbox_auditor (issue 23 item 3: all SQL through pgcall):
-- the counts internal/pgcall.ReadPublicationSummary used to compute with a hand-written SELECT
-- over the kernel tables now come from one SECURITY DEFINER function. Nothing else changes.
SET LOCAL ROLE outbox_owner;

-- outbox.publication_summary() RETURNS TABLE (...)  (public, SPEC R-AK-4, T-5, T-8)
-- Purpose: the whole-outbox counts a demo, a report or an end-to-end test checks: events,
--   published events, events whose every mandatory delivery is acknowledged (the two must agree),
--   non-terminal deliveries, attempt starts and starts without a finish.
-- Cost: full scans of the hot tables (demos, tests, reports; never metrics).
-- Locking: none (one MVCC snapshot). SQLSTATEs: none of its own.
-- Caller: outbox_auditor (SECURITY DEFINER: the auditor reads no kernel table directly here).
CREATE FUNCTION outbox.publication_summary()
RETURNS TABLE (events bigint, published bigint, fully_acked bigint, non_terminal bigint,
               attempt_starts bigint, open_attempts bigint)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT (SELECT pg_catalog.count(*) FROM outbox.outbox_events),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_publications),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_events AS e
             WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                                WHERE d.event_id = e.event_id AND d.mandatory AND d.status <> 'acknowledged')),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS d WHERE d.status IN ('pending', 'leased')),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_delivery_attempt_starts),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_delivery_attempt_starts AS s
             WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_delivery_attempt_finishes AS f WHERE f.attempt_id = s.attempt_id))
$fn$;

COMMENT ON FUNCTION outbox.publication_summary() IS
    'Whole-outbox counts: events, published, fully acknowledged, non-terminal deliveries, attempt starts, open attempts (full scans; demos, tests, reports). SPEC R-AK-4, T-5. Caller: outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.publication_summary() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.publication_summary() TO outbox_auditor;


RESET ROLE;
