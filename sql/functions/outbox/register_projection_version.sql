-- outbox.register_projection_version(p_projection_name text, p_projection_version integer,
--   p_semantic_definition_sha256 text) RETURNS text  (public, SPEC §11b R-PV-1, §13)
-- Purpose: register a version of a projection, insert-or-compare: 'registered' (the first version
--   of a projection becomes active, every later one shadow) or 'existing' (same semantic digest;
--   nothing written). The digest is 64 lower-case hex digits or 'unknown'.
-- Locking: the primary key serialises registrations of one version; the partial unique index
--   projection_versions_one_active keeps one active version (a concurrent first registration of
--   another version fails with 23505: retry it and it registers as shadow).
-- SQLSTATEs: 22023 projection name not a literal, version < 1, digest not 64 hex digits nor
--   'unknown'; OB801 the version is registered with another semantic definition digest.
-- Design notes: docs/projection-versions.md#outboxregister_projection_version
-- Caller: outbox_registrar, SECURITY DEFINER: it has no table grants.
CREATE OR REPLACE FUNCTION outbox.register_projection_version(p_projection_name text, p_projection_version integer, p_semantic_definition_sha256 text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_existing text;
BEGIN
    IF p_projection_name IS NULL OR p_projection_name !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_projection_name) > 200
       OR p_projection_version IS NULL OR p_projection_version < 1 THEN
        RAISE EXCEPTION 'projection version: invalid projection key'
            USING ERRCODE = '22023', DETAIL = 'projection_name must match ^[a-z0-9][a-z0-9._@-]*$ (at most 200 characters) and projection_version >= 1';
    END IF;
    IF p_semantic_definition_sha256 IS NULL
       OR (p_semantic_definition_sha256 !~ '^[0-9a-f]{64}$' AND p_semantic_definition_sha256 <> 'unknown') THEN
        RAISE EXCEPTION 'projection version: invalid semantic definition digest'
            USING ERRCODE = '22023', DETAIL = 'semantic_definition_sha256 is 64 lower-case hex digits or ''unknown''';
    END IF;

    INSERT INTO outbox.projection_versions AS v (projection_name, projection_version, semantic_definition_sha256, state)
    VALUES (p_projection_name, p_projection_version, p_semantic_definition_sha256,
            CASE WHEN EXISTS (SELECT 1 FROM outbox.projection_versions AS o WHERE o.projection_name = p_projection_name)
                 THEN 'shadow' ELSE 'active' END)
    ON CONFLICT (projection_name, projection_version) DO NOTHING;
    IF FOUND THEN
        RETURN 'registered';
    END IF;

    SELECT v.semantic_definition_sha256 INTO STRICT v_existing
      FROM outbox.projection_versions AS v
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version;
    IF v_existing <> p_semantic_definition_sha256 THEN
        RAISE EXCEPTION 'projection version conflict: %@% is registered with another semantic definition', p_projection_name, p_projection_version
            USING ERRCODE = 'OB801',
                  DETAIL = pg_catalog.format('registered %s, now %s', v_existing, p_semantic_definition_sha256),
                  HINT = 'a changed semantic definition is a new projection version (SPEC R-PV-1)';
    END IF;
    RETURN 'existing';
END
$function$;

COMMENT ON FUNCTION outbox.register_projection_version(text, integer, text) IS
    'Register a projection version, insert-or-compare: registered (first version of a projection: active, later ones: shadow) | existing; OB801 another semantic digest for the same version; 22023 invalid key or digest. SPEC R-PV-1, §13. Caller: outbox_registrar.';

REVOKE ALL ON FUNCTION outbox.register_projection_version(text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_projection_version(text, integer, text) TO outbox_registrar;
