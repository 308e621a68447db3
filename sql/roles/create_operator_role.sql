-- The controlled-recovery role (SPEC R-SEC-1, R-AK-10): outbox_operator may call the recovery
-- functions of R-AK-10 and nothing else (outbox.preview_redelivery, outbox.redeliver_quarantined;
-- the grants are in those functions' files). A NOLOGIN group role like the others; operators
-- grant it to the login users who handle cases. Roles are cluster-wide: created idempotently,
-- tolerant of a parallel template build creating the same role at the same moment.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_operator') THEN
        BEGIN
            CREATE ROLE outbox_operator NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;
