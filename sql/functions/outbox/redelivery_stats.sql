-- outbox.redelivery_stats() RETURNS TABLE (destination text, reason text, redeliveries bigint)
-- (public, SPEC R-AK-10, R-DP-4)
-- Purpose: controlled recoveries so far, per destination and quarantine reason (the reason code
--   of the quarantine that was recovered - a closed list, low cardinality - never the operator's
--   free text), from the recovery audit outbox.outbox_recoveries. The dispatcher exposes it as
--   pgoutbox_redeliveries_total{destination,reason}; the counts only grow (the audit is
--   append-only).
-- Cost: one aggregate over the audit table, which grows by one row per manual recovery.
-- Locking: none (plain MVCC reads).
-- SQLSTATEs: none of its own.
-- Callers: outbox_dispatcher (metrics), outbox_auditor.
CREATE OR REPLACE FUNCTION outbox.redelivery_stats()
 RETURNS TABLE(destination text, reason text, redeliveries bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT r.destination, r.quarantine_reason, pg_catalog.count(*)
      FROM outbox.outbox_recoveries AS r
     GROUP BY r.destination, r.quarantine_reason
     ORDER BY r.destination, r.quarantine_reason
$function$;

COMMENT ON FUNCTION outbox.redelivery_stats() IS
    'Controlled recoveries per destination and quarantine reason code, from the recovery audit (metric pgoutbox_redeliveries_total). SPEC R-AK-10. Callers: outbox_dispatcher, outbox_auditor.';

REVOKE ALL ON FUNCTION outbox.redelivery_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.redelivery_stats() TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.redelivery_stats() TO outbox_dispatcher;
