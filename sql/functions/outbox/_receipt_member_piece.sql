-- outbox._receipt_member_piece(p_receipt jsonb, p_member text, p_json_type text,
--   p_projection_name text, p_projection_version integer, p_event_type text,
--   p_event_schema_version text, p_minimum bigint) RETURNS text
-- (private, SPEC R-AK-1a, R-AK-2, HP-1, HP-2)
-- Purpose: one registered member of a receipt kind in the canonical text the ack predicate of
--   outbox.ack_deliveries rebuilds: ',"<member>":<value>' when the receipt carries the member
--   with its registered JSON type (integers without fraction or exponent, |n| <= 2^53-1, not
--   below the registered minimum p_minimum) and, where the kernel knows the value, that value
--   (the frozen projection target, the event's type and schema version); NULL when the member is
--   absent or wrong - the rebuilt text then differs from the receipt's and the full rule
--   (outbox._receipt_problem through outbox._ack_problem) decides.
--   A plain SQL expression (no query, no SET clause, not SECURITY DEFINER): PostgreSQL inlines
--   it into the calling statement, so it is never a per-item function call (HP-1).
-- Caller: outbox.ack_deliveries; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._receipt_member_piece(p_receipt jsonb, p_member text, p_json_type text, p_projection_name text, p_projection_version integer, p_event_type text, p_event_schema_version text, p_minimum bigint, p_max_length integer)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN p_member IS NOT NULL AND p_receipt ? p_member
                 AND CASE p_json_type
                         WHEN 'string' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'string'
                                            AND (p_max_length IS NULL OR pg_catalog.length(p_receipt->>p_member) <= p_max_length)
                         WHEN 'boolean' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'boolean'
                         WHEN 'integer' THEN pg_catalog.jsonb_typeof(p_receipt->p_member) = 'number'
                                             AND (p_receipt->p_member)::text ~ '^-?(0|[1-9][0-9]{0,15})$'
                                             AND pg_catalog.abs((p_receipt->p_member)::text::numeric) <= 9007199254740991
                                             AND (p_minimum IS NULL OR (p_receipt->p_member)::text::numeric >= p_minimum)
                         ELSE false END
                 AND CASE p_member
                         WHEN 'projectionName' THEN p_projection_name IS NULL
                                                    OR p_receipt->p_member = pg_catalog.to_jsonb(p_projection_name)
                         WHEN 'projectionVersion' THEN p_projection_name IS NULL
                                                       OR p_receipt->p_member = pg_catalog.to_jsonb(p_projection_version)
                         WHEN 'eventType' THEN p_receipt->p_member = pg_catalog.to_jsonb(p_event_type)
                         WHEN 'eventSchemaVersion' THEN p_receipt->p_member = pg_catalog.to_jsonb(p_event_schema_version)
                         ELSE true END
                THEN ',"' || p_member || '":' || (p_receipt->p_member)::text END
$function$;

COMMENT ON FUNCTION outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, bigint, integer) IS
    'Private, inlined: ,"member":value of a registered receipt member that has its type and known value, else NULL (SPEC R-AK-1a, HP-1).';

REVOKE ALL ON FUNCTION outbox._receipt_member_piece(jsonb, text, text, text, integer, text, text, bigint, integer) FROM PUBLIC;
