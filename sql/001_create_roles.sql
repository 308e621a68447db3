-- Roles and database-level grants (SPEC R-SEC-1).
-- Kernel roles (SPEC R-SEC-1). Roles are cluster-wide: created idempotently, tolerant of a
-- parallel template build creating the same role at the same moment (duplicate_object).
-- All are NOLOGIN group roles; operators grant them to login users.
DO $roles$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['outbox_owner', 'outbox_registrar', 'outbox_producer',
                                  'outbox_dispatcher', 'outbox_consumer', 'outbox_auditor']
    LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- created concurrently by another migration run
            END;
        END IF;
    END LOOP;
END
$roles$;

-- The owner creates the kernel's schemas in this database.
DO $db$
BEGIN
    EXECUTE format('GRANT CREATE, CONNECT, TEMPORARY ON DATABASE %I TO outbox_owner', pg_catalog.current_database());
    EXECUTE format('REVOKE CREATE ON DATABASE %I FROM PUBLIC', pg_catalog.current_database());
END
$db$;

