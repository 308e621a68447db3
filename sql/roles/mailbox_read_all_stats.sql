-- mailbox.acquire_pump decides whether the recorded holder of a source is still alive by the
-- holder's pid AND backend_start in pg_stat_activity (a dead session's pid may be reused).
-- PostgreSQL shows another session's backend_start only to members of that session's role or
-- of pg_read_all_stats; the SECURITY DEFINER functions run as outbox_owner, so outbox_owner
-- needs pg_read_all_stats (read-only statistics, no data). Granting it needs a superuser or a
-- role with ADMIN OPTION on pg_read_all_stats; without it the migration warns and
-- acquire_pump refuses with a HINT naming this grant (docs/mailbox.md).
DO $stats$
BEGIN
    IF NOT pg_catalog.pg_has_role('outbox_owner', 'pg_read_all_stats', 'USAGE') THEN
        BEGIN
            GRANT pg_read_all_stats TO outbox_owner;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'could not GRANT pg_read_all_stats TO outbox_owner: mailbox.acquire_pump will refuse until a superuser grants it';
        END;
    END IF;
END
$stats$;
