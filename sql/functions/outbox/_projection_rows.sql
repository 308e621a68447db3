-- outbox._projection_rows(p_projection_name text, p_projection_version integer)
--   RETURNS TABLE (row_key text, row_sha256 text)  (private helper, SPEC R-PV-4)
-- The content rows of a projection version: every row of its registered row source
--   (outbox.projection_row_sources) as its key and the jcs-sha256-v1 of its row_document (RFC 8785
--   text, so member order and whitespace never matter). The relation is named by its regclass
--   (quoted by PostgreSQL), never by text.
-- SQLSTATEs: OB802 version not registered or no row source registered; 22023 a row_key NULL.
-- Locking: none. Caller: projection_digest, compare_projection_versions.
CREATE OR REPLACE FUNCTION outbox._projection_rows(p_projection_name text, p_projection_version integer)
 RETURNS TABLE(row_key text, row_sha256 text)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
AS $function$
DECLARE
    v_src regclass;
BEGIN
    SELECT s.row_source INTO v_src FROM outbox.projection_row_sources AS s
     WHERE s.projection_name = p_projection_name AND s.projection_version = p_projection_version;
    IF v_src IS NULL THEN
        RAISE EXCEPTION 'projection %@% has no registered row source', p_projection_name, p_projection_version
            USING ERRCODE = 'OB802',
                  HINT = 'the registrar registers it: SELECT outbox.register_projection_rows(projection_name, projection_version, ''schema.view''::regclass)';
    END IF;
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT r.row_key::text, outbox._sha256_hex(outbox.jcs_canonicalize(r.row_document::json)) FROM %s AS r', v_src);
END
$function$;

REVOKE ALL ON FUNCTION outbox._projection_rows(text, integer) FROM PUBLIC;
