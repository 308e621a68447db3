-- inbox._inbox_caller_ok(p_consumer_name text) RETURNS TABLE(ok boolean)  (private helper, SPEC R-SEC-5)
-- THE caller rule of the inbox, one row: ok when the calling role may act as consumer
-- p_consumer_name - a session whose login is a member of outbox_owner (a superuser is a member of
-- every role), or a calling role (the role the session switched to with SET ROLE, else the
-- session user) that is a member of the role bound to p_consumer_name in inbox.consumer_roles.
-- A plain SQL query (no SET clause, not SECURITY DEFINER) used in FROM: PostgreSQL inlines it
-- into the calling statement, so the hot paths (inbox.accept_delivery, inbox.confirm_delivery)
-- test it as a predicate, never as a per-item function call (HP-1); inbox._inbox_check_caller
-- raises with its detail when it is not ok.
-- SQLSTATEs: none. Locking: none.
-- Caller: inbox functions running as outbox_owner only; granted to nobody.
CREATE OR REPLACE FUNCTION inbox._inbox_caller_ok(p_consumer_name text)
 RETURNS TABLE(ok boolean)
 LANGUAGE sql
 STABLE
AS $function$
    SELECT pg_catalog.pg_has_role(session_user, 'outbox_owner', 'MEMBER')
           OR (c.role_name IS NOT NULL
               AND pg_catalog.pg_has_role(coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user)::name,
                                          c.role_name, 'MEMBER'))
      FROM (SELECT) AS one
      LEFT JOIN inbox.consumer_roles AS c ON c.consumer_name = p_consumer_name
$function$;

COMMENT ON FUNCTION inbox._inbox_caller_ok(text) IS
    'Private, inlined in FROM: one row, ok when the calling role may act as the consumer (outbox_owner member, or member of the role bound in inbox.consumer_roles; SPEC R-SEC-5).';

REVOKE ALL ON FUNCTION inbox._inbox_caller_ok(text) FROM PUBLIC;
