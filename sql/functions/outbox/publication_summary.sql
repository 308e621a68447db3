-- outbox.publication_summary() RETURNS TABLE (...)  (public, SPEC R-AK-4, T-5, T-8)
-- Purpose: the whole-outbox counts a demo, a report or an end-to-end test checks: events,
--   published events, events whose every mandatory delivery is acknowledged (the two must agree),
--   non-terminal deliveries, attempt starts and starts without a finish.
-- Cost: full scans of the hot tables (demos, tests, reports; never metrics).
-- Locking: none (one MVCC snapshot). SQLSTATEs: none of its own.
-- Caller: outbox_auditor (SECURITY DEFINER: the auditor reads no kernel table directly here).
CREATE OR REPLACE FUNCTION outbox.publication_summary()
 RETURNS TABLE(events bigint, published bigint, fully_acked bigint, non_terminal bigint, attempt_starts bigint, open_attempts bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT (SELECT pg_catalog.count(*) FROM outbox.outbox_events),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_publications),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_events AS e
             WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_deliveries AS d
                                WHERE d.event_id = e.event_id AND d.mandatory AND d.status <> 'acknowledged')),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS d WHERE d.status IN ('pending', 'leased')),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_delivery_attempt_starts),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_delivery_attempt_starts AS s
             WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_delivery_attempt_finishes AS f WHERE f.attempt_id = s.attempt_id))
$function$;

COMMENT ON FUNCTION outbox.publication_summary() IS
    'Whole-outbox counts: events, published, fully acknowledged, non-terminal deliveries, attempt starts, open attempts (full scans; demos, tests, reports). SPEC R-AK-4, T-5. Caller: outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.publication_summary() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.publication_summary() TO outbox_auditor;
