-- The kernel's roles, current definition (SPEC R-SEC-1; docs/security.md, docs/contract.md). All
-- are NOLOGIN group roles that operators grant to login users; outbox_owner owns every kernel
-- object. Roles are cluster-wide: created idempotently, tolerant of a parallel test-template build
-- creating the same role at the same moment (duplicate_object). Migrations 001 (the first six),
-- 013 (operator), 015 (retention), 016 (mailbox), 024 (intake, observation_projector) and 031
-- (projector) created them; TestSQLRolesCurrent checks this list against a fresh install's grants.
-- A new role: add it here and create it the same way in the new migration that first grants to it.
DO $roles$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['outbox_owner', 'outbox_registrar', 'outbox_producer',
                                  'outbox_dispatcher', 'outbox_consumer', 'outbox_auditor',
                                  'outbox_operator', 'outbox_retention', 'outbox_mailbox',
                                  'outbox_intake', 'outbox_observation_projector', 'outbox_projector']
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
