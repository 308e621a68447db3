-- outbox.register_projection_rows(projection_name text, projection_version int, row_source text)
--   RETURNS text  (public, SPEC R-PV-4)
-- Purpose: name the relation (usually a view of the projection's own tables) whose rows
--   (row_key text unique, row_document json|jsonb without apply times) are the version's content,
--   for projection_digest and compare_projection_versions. Insert-or-compare: 'registered' |
--   'existing'; another relation for a registered version is OB801.
--   row_source is a (schema-qualified) relation name, resolved here as the owner.
-- SQLSTATEs: OB802 version not registered; 22023 no such relation, or it lacks row_key (text) or
--   row_document (json, jsonb); 42501 outbox_owner may not SELECT it (GRANT SELECT ON it TO
--   outbox_owner: the digest functions read it as the owner). Locking: the primary key.
-- Caller: outbox_registrar.
CREATE OR REPLACE FUNCTION outbox.register_projection_rows(p_projection_name text, p_projection_version integer, p_row_source_name text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_have       regclass;
    p_row_source regclass;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox.projection_versions AS v
                    WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version) THEN
        RAISE EXCEPTION 'projection %@% is not registered', p_projection_name, p_projection_version USING ERRCODE = 'OB802';
    END IF;
    p_row_source := pg_catalog.to_regclass(p_row_source_name);
    IF p_row_source IS NULL
       OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute AS a WHERE a.attrelid = p_row_source AND a.attname = 'row_key'
                         AND NOT a.attisdropped AND a.atttypid IN ('text'::regtype, 'character varying'::regtype))
       OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute AS a WHERE a.attrelid = p_row_source AND a.attname = 'row_document'
                         AND NOT a.attisdropped AND a.atttypid IN ('json'::regtype, 'jsonb'::regtype)) THEN
        RAISE EXCEPTION 'projection row source % must be a relation with the columns row_key text and row_document json or jsonb', pg_catalog.left(coalesce(p_row_source_name, 'NULL'), 200)
            USING ERRCODE = '22023';
    END IF;
    IF NOT pg_catalog.has_table_privilege('outbox_owner', p_row_source, 'SELECT') THEN
        RAISE EXCEPTION 'outbox_owner may not read %', p_row_source USING ERRCODE = '42501',
              HINT = pg_catalog.format('GRANT SELECT ON %s TO outbox_owner', p_row_source);
    END IF;
    INSERT INTO outbox.projection_row_sources (projection_name, projection_version, row_source)
    VALUES (p_projection_name, p_projection_version, p_row_source)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN 'registered';
    END IF;
    SELECT s.row_source INTO v_have FROM outbox.projection_row_sources AS s
     WHERE s.projection_name = p_projection_name AND s.projection_version = p_projection_version;
    IF v_have <> p_row_source THEN
        RAISE EXCEPTION 'projection %@% has another row source (%)', p_projection_name, p_projection_version, v_have
            USING ERRCODE = 'OB801';
    END IF;
    RETURN 'existing';
END
$function$;

COMMENT ON FUNCTION outbox.register_projection_rows(text, integer, text) IS
    'Register the relation of a projection version''s content rows (row_key, row_document) for projection_digest (SPEC R-PV-4). Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION outbox.register_projection_rows(text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_projection_rows(text, integer, text) TO outbox_registrar;
