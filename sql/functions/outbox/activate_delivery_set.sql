-- outbox.activate_delivery_set(delivery_set_version, definition_schema_version,
--                              digest_algorithm_version, definition_digest)
-- Purpose: make the registered definition named by its full quartet the one active version of
--   this database (R-DS-5); the previously active version becomes 'retired' (it may be selected
--   again later: activation only ever selects a registered definition, never defines one).
--   Events appended afterwards freeze the new quartet; history is never reinterpreted (R-DS-6).
-- Locking: SHARE ROW EXCLUSIVE on outbox.delivery_set_versions (self-conflicting: activations
--   and registrations serialize; readers such as append_event are not blocked) - a lock no role
--   outside the kernel can take, unlike an advisory key (R-SEC-5); the unique partial index
--   delivery_set_versions_one_active guarantees one active row.
-- Projection versions (R-PV-2): a definition that would retarget a projection with registered
--   versions (outbox._delivery_set_retarget_problem) is refused with OB808; the pointer moves only
--   through outbox.cutover_projection, which switches the version first and then calls this.
-- Raises: OB101 when no registered definition has exactly that quartet; OB808 as above.
-- Caller: outbox_registrar; outbox.cutover_projection (as outbox_owner).
CREATE OR REPLACE FUNCTION outbox.activate_delivery_set(p_delivery_set_version integer, p_definition_schema_version integer, p_digest_algorithm_version text, p_definition_digest text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_status  text;
    v_problem text;
BEGIN
    LOCK TABLE outbox.delivery_set_versions IN SHARE ROW EXCLUSIVE MODE;
    SELECT status INTO v_status
    FROM outbox.delivery_set_versions
    WHERE delivery_set_version = p_delivery_set_version
      AND definition_schema_version = p_definition_schema_version
      AND digest_algorithm_version = p_digest_algorithm_version
      AND definition_digest = p_definition_digest
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no registered delivery-set definition has this quartet'
            USING ERRCODE = 'OB101',
                  DETAIL = format('(%s, %s, %s, %s)', p_delivery_set_version, p_definition_schema_version,
                                  p_digest_algorithm_version, p_definition_digest),
                  HINT = 'register the definition with outbox.register_delivery_set first';
    END IF;
    IF v_status = 'active' THEN
        RETURN;
    END IF;
    v_problem := outbox._delivery_set_retarget_problem(p_delivery_set_version, p_definition_schema_version,
                                                       p_digest_algorithm_version, p_definition_digest, NULL, NULL);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'delivery-set activation would retarget a projection outside cutover_projection'
            USING ERRCODE = 'OB808', DETAIL = v_problem,
                  HINT = 'build the version as a shadow and switch with outbox.cutover_projection, which activates the set (SPEC R-PV-2)';
    END IF;
    UPDATE outbox.delivery_set_versions SET status = 'retired' WHERE status = 'active';
    UPDATE outbox.delivery_set_versions SET status = 'active', activated_at = now()
    WHERE delivery_set_version = p_delivery_set_version;
END
$function$;

COMMENT ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) IS
    'Make one registered delivery-set quartet the active version (SPEC R-DS-5). Raises OB101; OB808 when it would retarget a versioned projection outside cutover_projection (R-PV-2). Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.activate_delivery_set(integer, integer, text, text) TO outbox_registrar;
