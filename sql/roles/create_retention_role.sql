-- The retention role (SPEC R-SEC-1, R-RT-1): outbox_retention runs the audited archive procedure
-- and sets/releases legal holds; it holds EXECUTE on those functions only (granted in each
-- function file) and USAGE on schema outbox. Roles are cluster-wide: created idempotently and
-- tolerant of a parallel template build creating it at the same moment (duplicate_object), as
-- sql/roles/create_roles.sql does for the first six roles.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'outbox_retention') THEN
        BEGIN
            CREATE ROLE outbox_retention NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created concurrently by another migration run
        END;
    END IF;
END
$roles$;
