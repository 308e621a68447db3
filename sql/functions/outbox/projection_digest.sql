-- outbox.projection_digest(projection_name text, projection_version int) RETURNS text
--   (public, SPEC R-PV-4, §13)
-- Purpose: the content digest of a projection version: jcs-sha256-v1 (SHA-256 of the RFC 8785
--   text) of [{"rowKey":…,"rowSha256":…}, …] over its registered row source, ordered by rowKey in
--   code-point order. Apply times are not rows' content (the row source leaves them out) and the
--   version number is not in it (timestamps render in UTC): the same source set projected twice, in any arrival order, gives
--   the same digest, and an online-built version can be compared with its rebuild.
-- SQLSTATEs: OB802 not registered / no row source; 22023 a NULL or duplicate row_key.
-- Locking: none (reads). Caller: outbox_auditor, outbox_projector.
CREATE OR REPLACE FUNCTION outbox.projection_digest(p_projection_name text, p_projection_version integer)
 RETURNS text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET "TimeZone" TO 'UTC'
 SET work_mem TO '64MB'
AS $function$
DECLARE
    v_n  bigint;
    v_nd bigint;
    v_doc text;
BEGIN
    SELECT pg_catalog.count(*), pg_catalog.count(DISTINCT r.row_key),
           '[' || coalesce(pg_catalog.string_agg(pg_catalog.format('{"rowKey":%s,"rowSha256":"%s"}', pg_catalog.to_json(r.row_key), r.row_sha256),
                                                 ',' ORDER BY r.row_key COLLATE "C"), '') || ']'
      INTO v_n, v_nd, v_doc
      FROM outbox._projection_rows(p_projection_name, p_projection_version) AS r;
    IF v_n <> v_nd THEN  -- count(DISTINCT) leaves NULL keys out: a NULL key counts as a duplicate
        RAISE EXCEPTION 'projection %@%: row_key must be unique and not NULL', p_projection_name, p_projection_version USING ERRCODE = '22023';
    END IF;
    RETURN outbox._sha256_hex(v_doc);
END
$function$;

COMMENT ON FUNCTION outbox.projection_digest(text, integer) IS
    'Content digest of a projection version over its registered row source, without apply times or version (SPEC R-PV-4). Caller: outbox_auditor, outbox_projector.';

REVOKE ALL ON FUNCTION outbox.projection_digest(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.projection_digest(text, integer) TO outbox_auditor;
GRANT EXECUTE ON FUNCTION outbox.projection_digest(text, integer) TO outbox_projector;
