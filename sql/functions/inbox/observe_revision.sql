-- inbox.observe_revision(p_consumer_name text, p_projection_name text, p_projection_version integer,
--   p_aggregate_id text, p_aggregate_revision bigint, p_build_token uuid DEFAULT NULL)
--   RETURNS text  (public, SPEC R-CO-3, R-PV-1, §13)
-- Purpose: the per-aggregate revision check of an ordered consumer, inside its transaction:
--   'apply' (revision = progress+1: progress advanced, the gaps it fills closed; commit it with the
--   receipt and the domain mutation, R-CO-2), 'duplicate' (revision <= progress: nothing written),
--   'gap' (revision > progress+1: the gap row inserted or updated, nothing else; the consumer
--   commits that alone and answers retryable awaiting_revision, R-CO-3).
-- Projection version (R-PV-1): as inbox.record_receipt's (inbox._inbox_check_version).
-- Locking: the progress row FOR UPDATE (created first when missing): observations of one aggregate
--   serialise until the observing transaction ends (R-SEC-5: no advisory key). READ COMMITTED.
-- SQLSTATEs: 42501 caller not bound to consumer_name; OB105 empty aggregate id or revision <= 0;
--   22023 bad consumer/projection key or a token without a projection; OB802 version unregistered
--   or retired; OB001 shadow version without its live build token, or a token for active/frozen.
-- Caller: outbox_consumer, SECURITY DEFINER: it has no table grants.
CREATE OR REPLACE FUNCTION inbox.observe_revision(p_consumer_name text, p_projection_name text, p_projection_version integer, p_aggregate_id text, p_aggregate_revision bigint, p_build_token uuid DEFAULT NULL::uuid)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_projection_name    text := coalesce(p_projection_name, '');
    v_projection_version integer := coalesce(p_projection_version, 0);
    v_last               bigint;
    v_version_state      text;
BEGIN
    PERFORM inbox._inbox_check_key(p_consumer_name, v_projection_name, v_projection_version);
    PERFORM inbox._inbox_check_caller(p_consumer_name);  -- R-SEC-5: only the bound role
    -- R-PV-1: the version's state in one primary-key lookup; the rare cases go to the helper.
    IF v_projection_name <> '' THEN
        SELECT pv.state INTO v_version_state
          FROM outbox.projection_versions AS pv
         WHERE pv.projection_name = v_projection_name AND pv.projection_version = v_projection_version;
    END IF;
    IF p_build_token IS NOT NULL
       OR (v_projection_name <> '' AND v_version_state IS DISTINCT FROM 'active' AND v_version_state IS DISTINCT FROM 'frozen') THEN
        PERFORM inbox._inbox_check_version(v_projection_name, v_projection_version, p_build_token);
    END IF;
    IF p_aggregate_id IS NULL OR p_aggregate_id = '' OR p_aggregate_revision IS NULL OR p_aggregate_revision <= 0 THEN
        RAISE EXCEPTION 'envelope invalid: aggregate id and revision'
            USING ERRCODE = 'OB105', DETAIL = 'aggregateId must be non-empty and aggregateRevision > 0';
    END IF;

    -- Serialise observations of one aggregate on its progress row (R-SEC-5: a row lock, never an
    -- advisory key another role could take). The first observation of an aggregate creates the
    -- row: revision 1 creates it applied (last_revision 1, done); any other revision creates it
    -- with last_revision 0 ("nothing applied yet") and locks it. A concurrent first observation
    -- waits on the primary key until this transaction ends, then finds the row.
    IF p_aggregate_revision = 1 THEN
        INSERT INTO inbox.inbox_revision_progress
               (consumer_name, projection_name, projection_version, aggregate_id, last_revision)
        VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, 1)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            UPDATE inbox.inbox_revision_gaps g
               SET closed_at = pg_catalog.now(), closed_by_revision = 1
             WHERE g.consumer_name = p_consumer_name AND g.projection_name = v_projection_name
               AND g.projection_version = v_projection_version AND g.aggregate_id = p_aggregate_id
               AND g.closed_at IS NULL AND g.expected_revision <= 1;
            RETURN 'apply';
        END IF;
    ELSE
        INSERT INTO inbox.inbox_revision_progress
               (consumer_name, projection_name, projection_version, aggregate_id, last_revision)
        VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, 0)
        ON CONFLICT DO NOTHING;
    END IF;
    -- A new statement: sees the row committed by a transaction we waited for.
    SELECT p.last_revision INTO STRICT v_last
      FROM inbox.inbox_revision_progress p
     WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
       AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id
       FOR UPDATE;

    IF p_aggregate_revision <= v_last THEN
        RETURN 'duplicate';
    END IF;

    IF p_aggregate_revision = v_last + 1 THEN
        UPDATE inbox.inbox_revision_progress p
           SET last_revision = p_aggregate_revision, updated_at = pg_catalog.now()
         WHERE p.consumer_name = p_consumer_name AND p.projection_name = v_projection_name
           AND p.projection_version = v_projection_version AND p.aggregate_id = p_aggregate_id;
        UPDATE inbox.inbox_revision_gaps g
           SET closed_at = pg_catalog.now(), closed_by_revision = p_aggregate_revision
         WHERE g.consumer_name = p_consumer_name AND g.projection_name = v_projection_name
           AND g.projection_version = v_projection_version AND g.aggregate_id = p_aggregate_id
           AND g.closed_at IS NULL AND g.expected_revision <= p_aggregate_revision;
        RETURN 'apply';
    END IF;

    INSERT INTO inbox.inbox_revision_gaps AS g
           (consumer_name, projection_name, projection_version, aggregate_id, expected_revision, seen_revision)
    VALUES (p_consumer_name, v_projection_name, v_projection_version, p_aggregate_id, v_last + 1, p_aggregate_revision)
    ON CONFLICT (consumer_name, projection_name, projection_version, aggregate_id, expected_revision) DO UPDATE
       SET seen_revision = GREATEST(g.seen_revision, EXCLUDED.seen_revision),
           last_seen_at = pg_catalog.now(),
           observation_count = g.observation_count + 1;
    RETURN 'gap';
END
$function$;

COMMENT ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint, uuid) IS
    'Per-aggregate revision check of an ordered consumer: apply (progress advanced, gaps closed) | duplicate | gap (gap recorded, nothing else); OB802 unregistered projection version, OB001 missing/stale build token of a shadow version. SPEC R-CO-3, R-PV-1, §13.';

REVOKE ALL ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION inbox.observe_revision(text, text, integer, text, bigint, uuid) TO outbox_consumer;
