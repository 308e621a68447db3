-- intake.ack_observations(items json)
--   RETURNS TABLE (observation_id uuid, outcome text, sqlstate text, detail text)
--   (public, SPEC R-OB-4, §13; fenced like R-AK-9; HP-1, HP-2)
-- Purpose: acknowledge many leased observations in one call and one transaction; one row per
--   item in input order: acknowledged | rejected. items = [{consumerName, observationId,
--   leaseToken, acceptedEnvelopeSha256}]. Acknowledged only under a live lease with that token,
--   the accepted envelope's digest, and a receipt for every registered projection of the consumer.
--   Per item: OB001 lease, OB002 digest_mismatch / receipt_missing, 22023 malformed item.
-- SQLSTATEs (whole call): 22023 items not a JSON array, or more than 1000 items.
-- Locking: the acknowledged work rows.
-- Design notes: docs/intake.md#intakeack_observations
-- Caller: outbox_observation_projector.
CREATE OR REPLACE FUNCTION intake.ack_observations(p_items json)
 RETURNS TABLE(observation_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    c_uuid constant text := '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
    v_now  timestamptz := pg_catalog.clock_timestamp();
    v_n    integer;
BEGIN
    IF p_items IS NULL OR pg_catalog.json_typeof(p_items) <> 'array' THEN
        RAISE EXCEPTION 'ack_observations: items must be a JSON array' USING ERRCODE = '22023';
    END IF;
    v_n := pg_catalog.json_array_length(p_items);
    -- every consumer named must be bound to the calling role (42501, R-SEC-5)
    PERFORM inbox._inbox_check_caller(c.cn)
       FROM (SELECT DISTINCT x.e ->> 'consumerName' AS cn
               FROM pg_catalog.json_array_elements(p_items) AS x(e)
              WHERE pg_catalog.json_typeof(x.e) = 'object' AND pg_catalog.json_typeof(x.e -> 'consumerName') = 'string'
              LIMIT 1001) AS c;
    IF v_n > 1000 THEN
        RAISE EXCEPTION 'ack_observations: at most 1000 items per call' USING ERRCODE = '22023',
              DETAIL = pg_catalog.format('%s items', v_n);
    END IF;
    RETURN QUERY
    WITH raw AS MATERIALIZED (
        SELECT x.ord, x.e, pg_catalog.json_typeof(x.e) = 'object' AS is_obj
          FROM pg_catalog.json_array_elements(p_items) WITH ORDINALITY AS x(e, ord)
    ), f AS (
        SELECT r.ord,
               CASE WHEN r.is_obj THEN r.e ->> 'consumerName' END AS cn,
               CASE WHEN r.is_obj THEN r.e ->> 'observationId' END AS oid_t,
               CASE WHEN r.is_obj THEN r.e ->> 'leaseToken' END AS tok_t,
               CASE WHEN r.is_obj THEN r.e ->> 'acceptedEnvelopeSha256' END AS sha
          FROM raw AS r
    ), p AS MATERIALIZED (
        SELECT f.ord, f.cn, f.sha,
               (f.cn IS NOT NULL AND coalesce(f.oid_t ~ c_uuid, false) AND coalesce(f.tok_t ~ c_uuid, false)
                AND coalesce(f.sha ~ '^[0-9a-f]{64}$', false)) AS well_formed,
               CASE WHEN f.oid_t ~ c_uuid THEN f.oid_t::uuid END AS oid,
               CASE WHEN f.tok_t ~ c_uuid THEN f.tok_t::uuid END AS tok
          FROM f
    ), j AS MATERIALIZED (
        SELECT p.ord, p.oid,
               CASE
                 WHEN NOT p.well_formed THEN '22023'
                 WHEN d.status IS DISTINCT FROM 'leased' OR d.lease_token <> p.tok OR d.lease_expires_at <= v_now THEN 'OB001'
                 WHEN i.accepted_envelope_sha256 <> p.sha THEN 'OB002'
                 WHEN EXISTS (SELECT 1 FROM intake.observation_projectors AS pr
                               WHERE pr.consumer_name = p.cn
                                 AND NOT EXISTS (SELECT 1 FROM inbox.observation_receipts AS rc
                                                  WHERE rc.consumer_name = pr.consumer_name
                                                    AND rc.projection_name = pr.projection_name
                                                    AND rc.projection_version = pr.projection_version
                                                    AND rc.observation_id = p.oid
                                                    AND rc.accepted_envelope_sha256 = p.sha)) THEN 'OB002'
                 ELSE NULL
               END AS state,
               CASE
                 WHEN NOT p.well_formed THEN 'item must be {consumerName, observationId, leaseToken, acceptedEnvelopeSha256} with UUIDs and a 64-hex digest'
                 WHEN d.status IS NULL THEN 'no_work_row'
                 WHEN d.status = 'acknowledged' THEN 'finished'
                 WHEN d.status = 'pending' THEN 'not_leased'
                 WHEN d.lease_token <> p.tok THEN 'stale_token'
                 WHEN d.lease_expires_at <= v_now THEN 'lease_expired'
                 WHEN i.accepted_envelope_sha256 <> p.sha THEN 'digest_mismatch'
                 ELSE 'receipt_missing'
               END AS why,
               d.status = 'leased' AS leased, p.cn, p.tok
          FROM p
          LEFT JOIN intake.observation_deliveries AS d ON p.well_formed AND d.consumer_name = p.cn AND d.observation_id = p.oid
          LEFT JOIN intake.observation_ids AS i ON p.well_formed AND i.observation_id = p.oid
    ), u AS (
        UPDATE intake.observation_deliveries AS d
           SET status = 'acknowledged', acknowledged_at = v_now
          FROM (SELECT DISTINCT j.cn, j.oid, j.tok FROM j WHERE j.state IS NULL AND j.leased) AS k
         WHERE d.consumer_name = k.cn AND d.observation_id = k.oid
           AND d.status = 'leased' AND d.lease_token = k.tok   -- re-checked on the row's latest version
        RETURNING d.consumer_name, d.observation_id
    ), r0 AS (
        SELECT j.*, pg_catalog.row_number() OVER (PARTITION BY j.cn, j.oid, (j.state IS NULL AND j.leased) ORDER BY j.ord) AS nth
          FROM j
    ), r AS (
        SELECT j.ord, j.oid,
               CASE WHEN j.state IS NULL AND j.leased AND j.nth > 1 THEN 'OB001'
                    WHEN j.state IS NULL AND j.leased AND NOT EXISTS (SELECT 1 FROM u WHERE u.consumer_name = j.cn AND u.observation_id = j.oid)
                    THEN 'OB001' ELSE j.state END AS state,
               CASE WHEN j.state IS NULL AND j.leased AND j.nth > 1 THEN 'finished'  -- the same observation twice in one call
                    WHEN j.state IS NULL AND j.leased AND NOT EXISTS (SELECT 1 FROM u WHERE u.consumer_name = j.cn AND u.observation_id = j.oid)
                    THEN 'lease_lost' ELSE j.why END AS why
          FROM r0 AS j
    )
    SELECT r.oid,
           CASE WHEN r.state IS NULL THEN 'acknowledged' ELSE 'rejected' END,
           r.state,
           CASE WHEN r.state IS NULL THEN NULL ELSE r.why END
      FROM r
     ORDER BY r.ord;
END
$function$;

COMMENT ON FUNCTION intake.ack_observations(json) IS
    'Acknowledge leased observations, fenced like ack_deliveries: lease token (a finished, expired or replaced lease - a second ack included - is OB001), accepted envelope digest and the consumer''s receipt for every registered projection (OB002); one row per item, in input order (SPEC R-OB-4). Every consumer named must be bound to the calling role (42501, R-SEC-5). Caller: outbox_observation_projector.';

REVOKE ALL ON FUNCTION intake.ack_observations(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.ack_observations(json) TO outbox_observation_projector;
