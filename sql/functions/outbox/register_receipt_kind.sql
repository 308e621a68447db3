CREATE OR REPLACE FUNCTION outbox.register_receipt_kind(p_receipt_kind text, p_receipt_type text, p_field_prefix text, p_time_field text, p_receipt_schema_version integer, p_members json, p_requires_projection boolean DEFAULT false)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_members jsonb;
    v_problem text;
    v_have    outbox.receipt_kinds;
    v_same    boolean;
BEGIN
    v_problem := CASE
        WHEN p_receipt_kind IS NULL OR p_receipt_kind !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_receipt_kind) > 100
            THEN pg_catalog.format('receipt_kind %L must match ^[a-z0-9][a-z0-9._@-]*$ (at most 100 characters)', p_receipt_kind)
        WHEN p_receipt_type IS NULL OR p_receipt_type !~ '^[A-Z][A-Za-z0-9]*$' OR pg_catalog.length(p_receipt_type) > 100
            THEN pg_catalog.format('receipt_type %L must match ^[A-Z][A-Za-z0-9]*$ (at most 100 characters)', p_receipt_type)
        WHEN p_field_prefix IS NULL OR p_field_prefix !~ '^[a-z][A-Za-z0-9]*$' OR pg_catalog.length(p_field_prefix) > 100
            THEN pg_catalog.format('field_prefix %L must match ^[a-z][A-Za-z0-9]*$ (at most 100 characters)', p_field_prefix)
        WHEN p_time_field IS NULL OR p_time_field !~ '^[a-z][A-Za-z0-9]*$' OR pg_catalog.length(p_time_field) > 100
            THEN pg_catalog.format('time_field %L must match ^[a-z][A-Za-z0-9]*$ (at most 100 characters)', p_time_field)
        WHEN p_time_field IN (p_field_prefix || 'Ref', p_field_prefix || 'SchemaVersion', p_field_prefix || 'DigestAlgorithmVersion',
                              p_field_prefix || 'Digest', 'destination', 'consumerName', 'eventId',
                              'eventEnvelopeDigestAlgorithmVersion', 'eventEnvelopeSha256', 'kind')
            THEN pg_catalog.format('time_field %s is a common receipt member', p_time_field)
        WHEN p_receipt_schema_version IS NULL OR p_receipt_schema_version < 1
            THEN pg_catalog.format('receipt_schema_version %s must be a positive integer', p_receipt_schema_version)
        WHEN p_requires_projection IS NULL
            THEN 'requires_projection must be true or false'
        WHEN p_members IS NULL OR pg_catalog.json_typeof(p_members) <> 'object'
            THEN 'members must be a JSON object: member name -> {type, required, minimum?, maxLength?}'
        WHEN (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_members))
             <> (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(p_members::jsonb))
            THEN 'members names a member twice'
        WHEN (SELECT pg_catalog.count(*) FROM pg_catalog.json_object_keys(p_members)) > 64
            THEN 'at most 64 members'
    END;
    IF v_problem IS NULL THEN
        v_members := p_members::jsonb;
        SELECT pg_catalog.format('member %s: %s', pg_catalog.to_json(x.key)::text, x.problem) INTO v_problem
          FROM (SELECT e.key,
                       CASE WHEN e.key !~ '^[a-z][A-Za-z0-9]*$' OR pg_catalog.length(e.key) > 100
                            THEN 'the name must match ^[a-z][A-Za-z0-9]*$ (at most 100 characters)'
                            WHEN e.key IN (p_field_prefix || 'Ref', p_field_prefix || 'SchemaVersion',
                                           p_field_prefix || 'DigestAlgorithmVersion', p_field_prefix || 'Digest',
                                           'destination', 'consumerName', 'eventId', 'eventEnvelopeDigestAlgorithmVersion',
                                           'eventEnvelopeSha256', 'kind', p_time_field)
                            THEN 'named like a common receipt member or the time field'
                            WHEN pg_catalog.jsonb_typeof(e.value) <> 'object'
                            THEN 'must be an object {type, required, minimum?, maxLength?}'
                            WHEN EXISTS (SELECT 1 FROM pg_catalog.jsonb_object_keys(e.value) AS k(k)
                                          WHERE k.k NOT IN ('type', 'required', 'minimum', 'maxLength'))
                            THEN 'only type, required, minimum and maxLength are allowed'
                            WHEN NOT (e.value->'type') <@ '["string", "integer", "boolean"]'::jsonb
                                 OR pg_catalog.jsonb_typeof(e.value->'type') IS DISTINCT FROM 'string'
                            THEN 'type must be "string", "integer" or "boolean"'
                            WHEN pg_catalog.jsonb_typeof(e.value->'required') IS DISTINCT FROM 'boolean'
                            THEN 'required must be true or false'
                            WHEN e.value ? 'minimum' AND e.value->>'type' <> 'integer'
                            THEN 'minimum is a bound of integer members only'
                            WHEN e.value ? 'maxLength' AND e.value->>'type' <> 'string'
                            THEN 'maxLength is a bound of string members only'
                            WHEN e.value ? 'minimum' AND outbox._json_int(e.value->'minimum') IS NULL
                            THEN 'minimum must be an integer with |n| <= 2^53-1'
                            WHEN e.value ? 'maxLength' AND (outbox._json_int(e.value->'maxLength') IS NULL
                                                            OR outbox._json_int(e.value->'maxLength') NOT BETWEEN 0 AND 2147483647)
                            THEN 'maxLength must be an integer from 0 to 2147483647'
                       END AS problem
                  FROM pg_catalog.jsonb_each(v_members) AS e) AS x
         WHERE x.problem IS NOT NULL
         ORDER BY x.key COLLATE "C"
         LIMIT 1;
    END IF;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'receipt kind definition invalid'
            USING ERRCODE = 'OB101', DETAIL = v_problem,
                  HINT = 'outbox.register_receipt_kind(kind, type, field_prefix, time_field, schema_version, members, requires_projection) (SPEC §13)';
    END IF;

    INSERT INTO outbox.receipt_kinds AS k
           (receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version, requires_projection)
    SELECT p_receipt_kind, p_receipt_type, p_field_prefix, p_time_field, p_receipt_schema_version, p_requires_projection
     WHERE NOT EXISTS (SELECT 1 FROM outbox.receipt_kinds AS o
                        WHERE o.receipt_kind <> p_receipt_kind
                          AND (o.receipt_type = p_receipt_type OR o.field_prefix = p_field_prefix))
    ON CONFLICT (receipt_kind) DO NOTHING;
    IF FOUND THEN
        INSERT INTO outbox.receipt_kind_members (receipt_kind, member, json_type, required, minimum, max_length)
        SELECT p_receipt_kind, e.key, e.value->>'type', (e.value->>'required')::boolean,
               outbox._json_int(e.value->'minimum'), outbox._json_int(e.value->'maxLength')::integer
          FROM pg_catalog.jsonb_each(v_members) AS e;
        RETURN;
    END IF;

    SELECT k.* INTO v_have FROM outbox.receipt_kinds AS k WHERE k.receipt_kind = p_receipt_kind;
    IF NOT FOUND THEN
        SELECT pg_catalog.format('receipt type %s or field prefix %s is used by receipt kind %s',
                                 p_receipt_type, p_field_prefix, o.receipt_kind) INTO v_problem
          FROM outbox.receipt_kinds AS o
         WHERE o.receipt_type = p_receipt_type OR o.field_prefix = p_field_prefix
         ORDER BY o.receipt_kind LIMIT 1;
        RAISE EXCEPTION 'receipt kind definition invalid'
            USING ERRCODE = 'OB101', DETAIL = v_problem;
    END IF;
    SELECT (v_have.receipt_type, v_have.field_prefix, v_have.time_field, v_have.receipt_schema_version, v_have.requires_projection)
           IS NOT DISTINCT FROM (p_receipt_type, p_field_prefix, p_time_field, p_receipt_schema_version, p_requires_projection)
       AND NOT EXISTS (
           (SELECT m.member, m.json_type, m.required, m.minimum, m.max_length
              FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = p_receipt_kind
            EXCEPT
            SELECT e.key, e.value->>'type', (e.value->>'required')::boolean,
                   outbox._json_int(e.value->'minimum'), outbox._json_int(e.value->'maxLength')::integer
              FROM pg_catalog.jsonb_each(v_members) AS e)
           UNION ALL
           (SELECT e.key, e.value->>'type', (e.value->>'required')::boolean,
                   outbox._json_int(e.value->'minimum'), outbox._json_int(e.value->'maxLength')::integer
              FROM pg_catalog.jsonb_each(v_members) AS e
            EXCEPT
            SELECT m.member, m.json_type, m.required, m.minimum, m.max_length
              FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = p_receipt_kind))
      INTO v_same;
    IF NOT v_same THEN
        RAISE EXCEPTION 'receipt kind already registered differently (receipt kinds are immutable)'
            USING ERRCODE = 'OB101',
                  DETAIL = pg_catalog.format('receipt kind %s is %s@%s (prefix %s, time field %s, requires_projection=%s) with members %s',
                                             v_have.receipt_kind, v_have.receipt_type, v_have.receipt_schema_version,
                                             v_have.field_prefix, v_have.time_field, v_have.requires_projection,
                                             (SELECT coalesce(pg_catalog.string_agg(m.member, ', ' ORDER BY m.member COLLATE "C"), 'none')
                                                FROM outbox.receipt_kind_members AS m WHERE m.receipt_kind = p_receipt_kind)),
                  HINT = 'a new receipt schema version is a new kind';
    END IF;
END
$function$;

COMMENT ON FUNCTION outbox.register_receipt_kind(text, text, text, text, integer, json, boolean) IS
    'Insert-or-compare of a receipt kind and its members {name: {type, required, minimum?, maxLength?}}; the same definition is a no-op, another one or a malformed one OB101. SPEC R-AK-1a, D-1, §13.';

REVOKE ALL ON FUNCTION outbox.register_receipt_kind(text, text, text, text, integer, json, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_receipt_kind(text, text, text, text, integer, json, boolean) TO outbox_registrar;
