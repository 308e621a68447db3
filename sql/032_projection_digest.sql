-- Projection content digests and version comparison (SPEC §11b R-PV-4, §13; issue 24 item 3):
--   * outbox.projection_row_sources: per registered projection version, the relation (a view
--     the projection provides) whose rows (row_key text, row_document json|jsonb) are the
--     projection's content without apply times; registered by outbox.register_projection_rows
--     (outbox_registrar; insert-or-compare, OB801 another relation);
--   * outbox.projection_digest(name, version): jcs-sha256-v1 of the sorted
--     [{rowKey, rowSha256}] array - the same rows in any arrival order, with any apply times,
--     give the same digest; the version number is not part of it, so two versions compare;
--   * outbox.compare_projection_versions(name, a, b): digests, row counts, receipt anti-join
--     (events with a receipt under one version and not the other), open revision gaps, open
--     quarantine of deliveries targeting either version, and up to 10 differing row keys.
--   * inbox._inbox_check_version accepts receipts of an unversioned projection (none of its
--     versions registered in this database: a consumer's inbox in a database of its own) as
--     before migration 031, which refused them with OB802 and so broke every consumer whose
--     inbox does not share the outbox's database.
-- New table and functions; one private helper redefined.
SET LOCAL ROLE outbox_owner;

CREATE TABLE outbox.projection_row_sources (
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    row_source         regclass NOT NULL,
    registered_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection_name, projection_version),
    FOREIGN KEY (projection_name, projection_version) REFERENCES outbox.projection_versions
);
COMMENT ON TABLE outbox.projection_row_sources IS
    'Per projection version, the relation of its content rows (row_key, row_document) that projection_digest reads (SPEC R-PV-4); insert-or-compare, never changed.';
CREATE TRIGGER tg_projection_row_sources__immutable BEFORE UPDATE OR DELETE ON outbox.projection_row_sources
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();

DROP FUNCTION inbox._inbox_check_version(text, integer, uuid);
-- inbox._inbox_check_version(p_projection_name text, p_projection_version integer, p_build_token uuid)
--   RETURNS void  (private, R-PV-1)
-- The projection-version check of inbox.record_receipt and inbox.observe_revision, called only
-- off their hot path. No projection: a token is 22023. A projection with no registered version
-- in this database: accepted (a consumer's own database). Unregistered or retired: OB802. Active
-- or frozen: no token (one given: OB001). Shadow: the live build's token is required (missing or
-- stale: OB001); the version row then stays FOR SHARE until the caller commits, so a token
-- rotation (start_shadow_build, FOR UPDATE) never overlaps a write under the old token.
-- SQLSTATEs: 22023, OB802, OB001. Caller: record_receipt, observe_revision; granted to nobody.
-- Design notes: docs/projection-versions.md#inbox_inbox_check_version
CREATE FUNCTION inbox._inbox_check_version(p_projection_name text, p_projection_version integer, p_build_token uuid)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_state text;
    v_live  uuid;
BEGIN
    IF coalesce(p_projection_name, '') = '' THEN
        IF p_build_token IS NOT NULL THEN
            RAISE EXCEPTION 'inbox: a build token without a projection'
                USING ERRCODE = '22023', DETAIL = 'a build token names a shadow projection version; a consumer without projection passes none';
        END IF;
        RETURN;
    END IF;
    SELECT v.state, v.live_build_token INTO v_state, v_live
      FROM outbox.projection_versions AS v
     WHERE v.projection_name = p_projection_name AND v.projection_version = p_projection_version
       FOR SHARE;
    IF NOT FOUND AND p_build_token IS NULL
       AND NOT EXISTS (SELECT 1 FROM outbox.projection_versions AS v WHERE v.projection_name = p_projection_name) THEN
        -- an unversioned projection: no version of it is registered in this database (a
        -- consumer's inbox in a database of its own, where no delivery set is active). Nothing
        -- to check against, so receipts are accepted as before versions existed; cutover is for
        -- projections whose registry shares the database (SPEC §11b, OB810 otherwise).
        RETURN;
    END IF;
    IF NOT FOUND OR v_state = 'retired' THEN
        RAISE EXCEPTION 'inbox: projection version %@% is %', p_projection_name, p_projection_version,
                        CASE WHEN v_state IS NULL THEN 'not registered' ELSE v_state END
            USING ERRCODE = 'OB802',
                  HINT = 'register it with outbox.register_projection_version (SPEC R-PV-1)';
    END IF;
    IF v_state IN ('active', 'frozen') THEN
        IF p_build_token IS NOT NULL THEN
            RAISE EXCEPTION 'fencing rejected: projection version %@% is % and takes no build token', p_projection_name, p_projection_version, v_state
                USING ERRCODE = 'OB001', DETAIL = 'build tokens fence shadow builds only; this build is over';
        END IF;
        RETURN;
    END IF;
    IF p_build_token IS NULL OR v_live IS DISTINCT FROM p_build_token THEN
        RAISE EXCEPTION 'fencing rejected: shadow projection version %@% needs its live build token', p_projection_name, p_projection_version
            USING ERRCODE = 'OB001',
                  DETAIL = CASE WHEN p_build_token IS NULL THEN 'no build token given'
                                WHEN v_live IS NULL THEN 'the version has no live build'
                                ELSE 'the token is stale: a later start_shadow_build rotated it' END,
                  HINT = 'pass build_token of outbox.start_shadow_build (SPEC R-PV-1)';
    END IF;
END
$fn$;

COMMENT ON FUNCTION inbox._inbox_check_version(text, integer, uuid) IS
    'Private: projection version check of the inbox functions (OB802 unregistered/retired, OB001 missing/stale shadow token or a token for an active/frozen version, 22023 token without projection); locks a shadow version FOR SHARE. SPEC R-PV-1.';
REVOKE ALL ON FUNCTION inbox._inbox_check_version(text, integer, uuid) FROM PUBLIC;


-- outbox._projection_rows(p_projection_name text, p_projection_version integer)
--   RETURNS TABLE (row_key text, row_sha256 text)  (private helper, SPEC R-PV-4)
-- The content rows of a projection version: every row of its registered row source
--   (outbox.projection_row_sources) as its key and the jcs-sha256-v1 of its row_document (RFC 8785
--   text, so member order and whitespace never matter). The relation is named by its regclass
--   (quoted by PostgreSQL), never by text.
-- SQLSTATEs: OB802 version not registered or no row source registered; 22023 a row_key NULL.
-- Locking: none. Caller: projection_digest, compare_projection_versions.
CREATE FUNCTION outbox._projection_rows(p_projection_name text, p_projection_version integer)
RETURNS TABLE (row_key text, row_sha256 text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
AS $fn$
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
$fn$;
REVOKE ALL ON FUNCTION outbox._projection_rows(text, integer) FROM PUBLIC;

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
CREATE FUNCTION outbox.register_projection_rows(p_projection_name text, p_projection_version integer, p_row_source_name text)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
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
$fn$;
COMMENT ON FUNCTION outbox.register_projection_rows(text, integer, text) IS
    'Register the relation of a projection version''s content rows (row_key, row_document) for projection_digest (SPEC R-PV-4). Caller: outbox_registrar.';
REVOKE ALL ON FUNCTION outbox.register_projection_rows(text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.register_projection_rows(text, integer, text) TO outbox_registrar;

-- outbox.projection_digest(projection_name text, projection_version int) RETURNS text
--   (public, SPEC R-PV-4, §13)
-- Purpose: the content digest of a projection version: jcs-sha256-v1 (SHA-256 of the RFC 8785
--   text) of [{"rowKey":…,"rowSha256":…}, …] over its registered row source, ordered by rowKey in
--   code-point order. Apply times are not rows' content (the row source leaves them out) and the
--   version number is not in it (timestamps render in UTC): the same source set projected twice, in any arrival order, gives
--   the same digest, and an online-built version can be compared with its rebuild.
-- SQLSTATEs: OB802 not registered / no row source; 22023 a NULL or duplicate row_key.
-- Locking: none (reads). Caller: outbox_auditor, outbox_projector.
CREATE FUNCTION outbox.projection_digest(p_projection_name text, p_projection_version integer)
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET work_mem = '64MB'
AS $fn$
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
$fn$;
COMMENT ON FUNCTION outbox.projection_digest(text, integer) IS
    'Content digest of a projection version over its registered row source, without apply times or version (SPEC R-PV-4). Caller: outbox_auditor, outbox_projector.';
REVOKE ALL ON FUNCTION outbox.projection_digest(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.projection_digest(text, integer) TO outbox_auditor, outbox_projector;

-- outbox.compare_projection_versions(projection_name text, a int, b int)
--   RETURNS TABLE (same bool, digest_a text, digest_b text, rows_a bigint, rows_b bigint,
--                  anti_join bigint, open_gaps bigint, open_quarantine bigint, sample_differences text[])
--   (public, SPEC R-PV-4, §13)
-- Purpose: compare two versions of a projection: their content digests (projection_digest) and
--   row counts; same = the digests are equal. anti_join: events with a receipt under one version
--   and not under the other (inbox.inbox_receipts); open_gaps: open revision gaps of either;
--   open_quarantine: quarantined deliveries targeting either; sample_differences: up to 10 row
--   keys (code-point order) present on one side only or with another row digest.
-- SQLSTATEs: OB802 a version not registered / without a row source; 22023 duplicate row keys.
-- Locking: none (reads). Caller: outbox_auditor, outbox_projector.
CREATE FUNCTION outbox.compare_projection_versions(p_projection_name text, p_a integer, p_b integer)
RETURNS TABLE (same boolean, digest_a text, digest_b text, rows_a bigint, rows_b bigint, anti_join bigint,
               open_gaps bigint, open_quarantine bigint, sample_differences text[])
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET work_mem = '64MB'
AS $fn$
DECLARE
    v_da text := outbox.projection_digest(p_projection_name, p_a);
    v_db text := outbox.projection_digest(p_projection_name, p_b);
BEGIN
    RETURN QUERY
    WITH ra AS MATERIALIZED (SELECT * FROM outbox._projection_rows(p_projection_name, p_a)),
         rb AS MATERIALIZED (SELECT * FROM outbox._projection_rows(p_projection_name, p_b)),
         d AS (SELECT coalesce(ra.row_key, rb.row_key) AS k
                 FROM ra FULL JOIN rb ON rb.row_key = ra.row_key
                WHERE ra.row_sha256 IS DISTINCT FROM rb.row_sha256),
         ea AS (SELECT r.event_id FROM inbox.inbox_receipts AS r WHERE r.projection_name = p_projection_name AND r.projection_version = p_a),
         eb AS (SELECT r.event_id FROM inbox.inbox_receipts AS r WHERE r.projection_name = p_projection_name AND r.projection_version = p_b)
    SELECT v_da = v_db, v_da, v_db,
           (SELECT pg_catalog.count(*) FROM ra), (SELECT pg_catalog.count(*) FROM rb),
           (SELECT pg_catalog.count(*) FROM ((SELECT * FROM ea EXCEPT SELECT * FROM eb) UNION ALL (SELECT * FROM eb EXCEPT SELECT * FROM ea)) AS x),
           (SELECT pg_catalog.count(*) FROM inbox.inbox_revision_gaps AS g
             WHERE g.projection_name = p_projection_name AND g.projection_version IN (p_a, p_b) AND g.closed_at IS NULL),
           (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS o
             WHERE o.status = 'quarantined' AND o.required_projection_name = p_projection_name
               AND o.required_projection_version IN (p_a, p_b)),
           (SELECT coalesce(pg_catalog.array_agg(s.k ORDER BY s.k COLLATE "C"), '{}')
              FROM (SELECT d.k FROM d ORDER BY d.k COLLATE "C" LIMIT 10) AS s);
END
$fn$;
COMMENT ON FUNCTION outbox.compare_projection_versions(text, integer, integer) IS
    'Compare two projection versions: digests, rows, receipt anti-join, open gaps, open quarantine, up to 10 differing row keys (SPEC R-PV-4). Caller: outbox_auditor, outbox_projector.';
REVOKE ALL ON FUNCTION outbox.compare_projection_versions(text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.compare_projection_versions(text, integer, integer) TO outbox_auditor, outbox_projector;


RESET ROLE;
