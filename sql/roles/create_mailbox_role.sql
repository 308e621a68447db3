-- The mailbox pipeline's role (SPEC R-SEC-1, §10, §13): a NOLOGIN group role granted to the
-- pump's login user (together with outbox_producer: its handler appends events). Roles are
-- cluster-wide: created idempotently, tolerant of a parallel template build creating it at the
-- same moment (duplicate_object), exactly as roles/create_roles.sql does for the kernel roles.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_mailbox') THEN
        BEGIN
            CREATE ROLE outbox_mailbox NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;

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
