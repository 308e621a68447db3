-- inbox._inbox_check_caller(p_consumer_name text) RETURNS void  (private helper, SPEC R-SEC-5)
-- A consumer acts only as itself: the calling role must be a member of the role bound to
-- p_consumer_name in inbox.consumer_roles (inbox.bind_consumer_role). The calling role is the
-- role the session switched to with SET ROLE, else the session user (inside a SECURITY DEFINER
-- function current_user is the owner; the role setting still names the caller's SET ROLE, which
-- PostgreSQL only lets a session set to a role it is a member of). A session whose login is a
-- member of outbox_owner - a superuser is a member of every role - passes first: the owner owns
-- the inbox tables and could write them directly anyway. One membership test on that path, a
-- primary-key probe and one more on the bound path (R-SEC-5, on every inbox call: no role view,
-- no SET clause - this private helper runs inside its callers' pinned search_path and
-- schema-qualifies everything).
-- SQLSTATEs: 42501 insufficient_privilege (name not bound, or bound to a role the caller is not
--   a member of). Locking: none.
-- Caller: inbox.record_receipt, inbox.read_receipt, inbox.observe_revision; granted to nobody.
CREATE OR REPLACE FUNCTION inbox._inbox_check_caller(p_consumer_name text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    v_bound  name;
    v_caller name := coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user)::name;
BEGIN
    IF EXISTS (SELECT FROM inbox._inbox_caller_ok(p_consumer_name) AS cc WHERE cc.ok) THEN  -- the rule; below: why not
        RETURN;
    END IF;
    SELECT c.role_name INTO v_bound FROM inbox.consumer_roles AS c WHERE c.consumer_name = p_consumer_name;
    IF v_bound IS NULL THEN
        RAISE EXCEPTION 'inbox: consumer % is not bound to a role', p_consumer_name
            USING ERRCODE = '42501',
                  DETAIL = pg_catalog.format('no row in inbox.consumer_roles for consumer_name %L', p_consumer_name),
                  HINT = 'the owner or registrar binds it: SELECT inbox.bind_consumer_role(consumer_name, role)';
    END IF;
    RAISE EXCEPTION 'inbox: role % may not act as consumer %', v_caller, p_consumer_name
        USING ERRCODE = '42501',
              DETAIL = pg_catalog.format('consumer_name %L is bound to role %I; the calling role is not a member of it', p_consumer_name, v_bound);
END
$function$;

COMMENT ON FUNCTION inbox._inbox_check_caller(text) IS
    'Private: 42501 unless the calling role is a member of the role bound to the consumer name (inbox.consumer_roles, SPEC R-SEC-5).';

REVOKE ALL ON FUNCTION inbox._inbox_check_caller(text) FROM PUBLIC;
