-- intake.register_workload(db_role name, workload_principal_id text, service text, environment
--   text, max_per_minute int DEFAULT 6000, max_body_bytes int DEFAULT 16384, deployment_id text
--   DEFAULT NULL) RETURNS void  (public, SPEC R-OB-1, R-OB-6, §13)
-- Purpose: bind a database role to a trusted source (workload principal, service, environment,
--   optional deployment) with its quota (accepted observations per minute) and its maximum body
--   size. Insert-or-compare: the same registration again is a no-op; any difference raises.
-- Locking: the primary key (a concurrent identical registration waits and then compares).
-- SQLSTATEs: 22023 an argument out of its form (role not existing, literal forms, bounds);
--   OB702 the role or the principal is already registered with other values.
-- Caller: outbox_registrar.
CREATE OR REPLACE FUNCTION intake.register_workload(p_db_role name, p_workload_principal_id text, p_service text, p_environment text, p_max_per_minute integer DEFAULT 6000, p_max_body_bytes integer DEFAULT 16384, p_deployment_id text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_old intake.workloads;
BEGIN
    IF p_db_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_db_role) THEN
        RAISE EXCEPTION 'intake: role % does not exist', p_db_role USING ERRCODE = '22023';
    END IF;
    -- a shared role would let every login granted it submit as this workload (R-OB-1, R-SEC-5)
    IF p_db_role IN ('outbox_owner', 'outbox_registrar', 'outbox_producer', 'outbox_dispatcher', 'outbox_consumer',
                     'outbox_auditor', 'outbox_operator', 'outbox_retention', 'outbox_mailbox', 'outbox_intake',
                     'outbox_observation_projector', 'outbox_projector')
       OR p_db_role LIKE 'pg\_%'
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_db_role AND (r.rolsuper OR r.rolname = 'public')) THEN
        RAISE EXCEPTION 'intake: a kernel, built-in or superuser role cannot be registered as a workload'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('role %I is shared by many logins; register a role of this workload''s own (granted outbox_intake)', p_db_role);
    END IF;
    IF EXISTS (SELECT 1 FROM inbox.consumer_roles c WHERE c.role_name = p_db_role) THEN
        RAISE EXCEPTION 'intake: role % is bound to a consumer', p_db_role
            USING ERRCODE = '22023', DETAIL = 'a workload role is a role of its own, never a consumer''s role (inbox.consumer_roles)';
    END IF;
    IF p_workload_principal_id IS NULL OR p_workload_principal_id !~ '^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$'
       OR p_service IS NULL OR p_service !~ '^[a-z0-9][a-z0-9._-]{0,99}$'
       OR p_environment IS NULL OR p_environment !~ '^[a-z0-9][a-z0-9._-]{0,63}$'
       OR (p_deployment_id IS NOT NULL AND p_deployment_id !~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$') THEN
        RAISE EXCEPTION 'intake: workload literal out of form'
            USING ERRCODE = '22023',
                  DETAIL = 'workload_principal_id [A-Za-z0-9._:/@-]{1,200}, service and environment lower-case literals, deployment_id [A-Za-z0-9._:-]{1,128}';
    END IF;
    IF p_max_per_minute IS NULL OR p_max_per_minute NOT BETWEEN 1 AND 10000000
       OR p_max_body_bytes IS NULL OR p_max_body_bytes NOT BETWEEN 2 AND 1048576 THEN
        RAISE EXCEPTION 'intake: quota out of bounds'
            USING ERRCODE = '22023', DETAIL = 'max_per_minute 1..10000000, max_body_bytes 2..1048576';
    END IF;
    INSERT INTO intake.workloads (db_role, workload_principal_id, service, environment, deployment_id, max_per_minute, max_body_bytes)
    VALUES (p_db_role, p_workload_principal_id, p_service, p_environment, p_deployment_id, p_max_per_minute, p_max_body_bytes)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT w.* INTO v_old FROM intake.workloads w
    WHERE w.db_role = p_db_role OR w.workload_principal_id = p_workload_principal_id
    ORDER BY w.db_role = p_db_role DESC LIMIT 1;
    IF v_old.db_role IS DISTINCT FROM p_db_role OR v_old.workload_principal_id IS DISTINCT FROM p_workload_principal_id
       OR v_old.service IS DISTINCT FROM p_service OR v_old.environment IS DISTINCT FROM p_environment
       OR v_old.deployment_id IS DISTINCT FROM p_deployment_id OR v_old.max_per_minute IS DISTINCT FROM p_max_per_minute
       OR v_old.max_body_bytes IS DISTINCT FROM p_max_body_bytes THEN
        RAISE EXCEPTION 'intake: workload already registered with other values'
            USING ERRCODE = 'OB702',
                  DETAIL = pg_catalog.format('role %I / principal %s: registrations are immutable (insert-or-compare)', p_db_role, p_workload_principal_id);
    END IF;
END
$function$;

COMMENT ON FUNCTION intake.register_workload(name, text, text, text, integer, integer, text) IS
    'Bind a database role to a trusted observation source with its quota; insert-or-compare, OB702 on other values (SPEC R-OB-1, R-OB-6) Kernel (the outbox_* group roles), built-in (pg_*), superuser and consumer-bound roles are refused (22023); a role already registered as another workload is OB702.';

REVOKE ALL ON FUNCTION intake.register_workload(name, text, text, text, integer, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.register_workload(name, text, text, text, integer, integer, text) TO outbox_registrar;
