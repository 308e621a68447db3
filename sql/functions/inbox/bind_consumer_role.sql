-- inbox.bind_consumer_role(p_consumer_name text, p_role_name text) RETURNS void
--   (public, SPEC R-SEC-5)
-- Purpose: bind a consumer name to the database role whose members may act as that consumer in
--   inbox.record_receipt / read_receipt / observe_revision. Insert-or-compare: the same binding
--   again is a no-op; a name bound to another role is refused (a binding never changes: rotate
--   logins by granting the bound role, not by rebinding the name). One row per name in
--   inbox.consumer_roles, append-only (bound_by = session user, bound_at).
-- SQLSTATEs: 22023 consumer name not a literal (D-4), role unknown, or a kernel group role
--   (outbox_*: binding a name to e.g. outbox_consumer would let every consumer act as it);
--   42710 duplicate_object when the name is bound to another role.
-- Caller: outbox_registrar (and outbox_owner).
CREATE OR REPLACE FUNCTION inbox.bind_consumer_role(p_consumer_name text, p_role_name text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_bound name;
BEGIN
    IF p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_consumer_name) > 200 THEN
        RAISE EXCEPTION 'bind_consumer_role: invalid consumer name'
            USING ERRCODE = '22023', DETAIL = 'consumer_name must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters (SPEC D-4)';
    END IF;
    IF p_role_name IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role_name) THEN
        RAISE EXCEPTION 'bind_consumer_role: unknown role'
            USING ERRCODE = '22023', DETAIL = pg_catalog.format('role %L does not exist', p_role_name);
    END IF;
    IF p_role_name LIKE 'outbox\_%' OR p_role_name LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'bind_consumer_role: a kernel or built-in role cannot be bound to a consumer'
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('role %I is shared by many logins; bind a role of this consumer''s own (granted outbox_consumer)', p_role_name);
    END IF;
    INSERT INTO inbox.consumer_roles (consumer_name, role_name)
    VALUES (p_consumer_name, p_role_name)
    ON CONFLICT (consumer_name) DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT c.role_name INTO v_bound FROM inbox.consumer_roles AS c WHERE c.consumer_name = p_consumer_name;
    IF v_bound <> p_role_name THEN
        RAISE EXCEPTION 'bind_consumer_role: consumer % is bound to another role', p_consumer_name
            USING ERRCODE = '42710', DETAIL = pg_catalog.format('consumer_name %L is bound to role %I', p_consumer_name, v_bound);
    END IF;
END
$function$;

COMMENT ON FUNCTION inbox.bind_consumer_role(text, text) IS
    'Bind a consumer name to the role whose members may act as it in the inbox functions (insert-or-compare; 22023, 42710). SPEC R-SEC-5. Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION inbox.bind_consumer_role(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.bind_consumer_role(text, text) TO outbox_registrar;
