-- intake._intake_caller() RETURNS intake.workloads  (private helper, SPEC R-OB-1)
-- The trusted source of the calling session: the workload registered for the calling role. The
-- calling role is the role the session switched to with SET ROLE, else the session user (inside
-- a SECURITY DEFINER function current_user is the owner; the role setting still names the
-- caller's SET ROLE, which PostgreSQL only lets a session set to a role it is a member of), as
-- inbox._inbox_check_caller does. Never anything the submission says.
-- SQLSTATEs: OB704 the calling role is not a registered workload. Locking: none.
-- Caller: intake.accept_observations, intake.record_send_failures; granted to nobody.
CREATE OR REPLACE FUNCTION intake._intake_caller()
 RETURNS intake.workloads
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_caller name := coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user)::name;
    v_w      intake.workloads;
BEGIN
    SELECT w.* INTO v_w FROM intake.workloads AS w WHERE w.db_role = v_caller;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'intake: session role % is not a registered workload', v_caller
            USING ERRCODE = 'OB704',
                  DETAIL = 'the trusted source comes from the workload registry, never from the submission',
                  HINT = 'the registrar registers the role: SELECT intake.register_workload(role, workload_principal_id, service, environment)';
    END IF;
    RETURN v_w;
END
$function$;

COMMENT ON FUNCTION intake._intake_caller() IS
    'Private: the registered workload of the calling role; OB704 when there is none (SPEC R-OB-1).';

REVOKE ALL ON FUNCTION intake._intake_caller() FROM PUBLIC;
