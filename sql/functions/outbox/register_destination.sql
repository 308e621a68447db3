-- outbox.register_destination(destination, consumer_name, receipt_kind, receipt_type,
--                             receipt_schema_version, projection_required, ordering)
-- Purpose: insert-or-compare one row of the canonical destination registry (SPEC §2, §3.4,
--   R-CL-7 ordering option). Re-registering the identical destination is a no-op; any
--   difference (a destination rebound to another consumer, another receipt, another
--   projection branch or ordering) is refused: destinations are immutable once registered.
--   A new destination gets the default retry policy row (SPEC §2).
-- Locking: the destination row (ON CONFLICT) only.
-- Raises: OB101 invalid literal, unknown receipt kind, receipt type/schema not those of the
--   kind, or a conflicting re-registration.
-- Caller: outbox_registrar.
CREATE OR REPLACE FUNCTION outbox.register_destination(p_destination text, p_consumer_name text, p_receipt_kind text, p_receipt_type text, p_receipt_schema_version integer, p_projection_required boolean, p_ordering text DEFAULT 'none'::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_kind outbox.receipt_kinds%ROWTYPE;
    v_have outbox.delivery_destinations%ROWTYPE;
BEGIN
    IF p_destination IS NULL OR p_destination !~ '^[a-z0-9][a-z0-9._@-]*$'
       OR p_consumer_name IS NULL OR p_consumer_name !~ '^[a-z0-9][a-z0-9._@-]*$' THEN
        RAISE EXCEPTION 'destination and consumer name must match ^[a-z0-9][a-z0-9._@-]*$'
            USING ERRCODE = 'OB101', DETAIL = format('destination=%L consumer_name=%L', p_destination, p_consumer_name);
    END IF;
    IF p_ordering IS NULL OR p_ordering NOT IN ('none', 'per_aggregate') THEN
        RAISE EXCEPTION 'ordering must be none or per_aggregate'
            USING ERRCODE = 'OB101', DETAIL = format('ordering=%L', p_ordering);
    END IF;
    IF p_projection_required IS NULL THEN
        RAISE EXCEPTION 'projection_required must be true or false' USING ERRCODE = 'OB101';
    END IF;
    SELECT * INTO v_kind FROM outbox.receipt_kinds WHERE receipt_kind = p_receipt_kind;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown receipt kind'
            USING ERRCODE = 'OB101', DETAIL = format('receipt_kind=%L', p_receipt_kind);
    END IF;
    IF p_receipt_type IS DISTINCT FROM v_kind.receipt_type
       OR p_receipt_schema_version IS DISTINCT FROM v_kind.receipt_schema_version THEN
        RAISE EXCEPTION 'receipt type/schema do not match the receipt kind'
            USING ERRCODE = 'OB101',
                  DETAIL = format('kind %s expects %s@%s, got %s@%s', v_kind.receipt_kind, v_kind.receipt_type,
                                  v_kind.receipt_schema_version, p_receipt_type, p_receipt_schema_version);
    END IF;

    INSERT INTO outbox.delivery_destinations
        (destination, consumer_name, receipt_kind, receipt_type, receipt_schema_version, projection_required, ordering)
    VALUES (p_destination, p_consumer_name, p_receipt_kind, p_receipt_type, p_receipt_schema_version,
            p_projection_required, p_ordering)
    ON CONFLICT (destination) DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;

    SELECT * INTO v_have FROM outbox.delivery_destinations WHERE destination = p_destination;
    IF (v_have.consumer_name, v_have.receipt_kind, v_have.receipt_type, v_have.receipt_schema_version,
        v_have.projection_required, v_have.ordering)
       IS DISTINCT FROM
       (p_consumer_name, p_receipt_kind, p_receipt_type, p_receipt_schema_version, p_projection_required, p_ordering) THEN
        RAISE EXCEPTION 'destination already registered differently (destinations are immutable)'
            USING ERRCODE = 'OB101',
                  DETAIL = format('destination %s is bound to consumer %s, receipt %s@%s, projection_required=%s, ordering=%s',
                                  v_have.destination, v_have.consumer_name, v_have.receipt_type,
                                  v_have.receipt_schema_version, v_have.projection_required, v_have.ordering);
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox.register_destination(text, text, text, text, integer, boolean, text) IS
    'Insert-or-compare a destination of the canonical registry (SPEC §2, R-CL-7). Raises OB101. Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION outbox.register_destination(text, text, text, text, integer, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_destination(text, text, text, text, integer, boolean, text) TO outbox_registrar;
