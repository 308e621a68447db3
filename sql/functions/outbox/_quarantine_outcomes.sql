-- outbox._quarantine_outcomes(p_batch outbox.outcome_items)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (private, SPEC R-AK-9, HP-1, HP-2; the rule of outbox.quarantine_deliveries, whose header says what it does)
-- Purpose: judge and record one parsed batch of quarantine_deliveries: p_batch is the one parse of the batch
--   (outbox._outcome_items: from the JSON form or from the typed parallel arrays), items in
--   input order with their 22023 shape problems already in sqlstate/detail. Both public forms of
--   outbox.quarantine_deliveries call it once per batch, so the rule lives here once.
-- Caller: outbox.quarantine_deliveries (both forms); granted to nobody (it runs as the owner inside them).
CREATE OR REPLACE FUNCTION outbox._quarantine_outcomes(p_batch outbox.outcome_items)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := pg_catalog.clock_timestamp();
    v_ord     integer[];
    v_dest    text[];
    v_event   uuid[];
    v_attempt uuid[];
    v_token   uuid[];
    v_reason  text[];
    v_code    text[];
    v_ref     text[];
    v_state   text[];
    v_detail  text[];
BEGIN
    SELECT p.ord, p.destination, p.event_id, p.attempt_id, p.lease_token, p.reason, p.error_code, p.error_ref,
           p.sqlstate, p.detail
      INTO v_ord, v_dest, v_event, v_attempt, v_token, v_reason, v_code, v_ref, v_state, v_detail
      FROM (SELECT (p_batch).*) AS p;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;

    PERFORM outbox._lock_deliveries(v_dest, v_event);

    SELECT pg_catalog.array_agg(j.state ORDER BY j.ord), pg_catalog.array_agg(j.detail ORDER BY j.ord)
      INTO v_state, v_detail
      FROM (SELECT u.ord,
                   CASE WHEN u.state IS NOT NULL THEN u.state WHEN f.problem IS NOT NULL THEN 'OB001' END AS state,
                   coalesce(u.detail, f.problem) AS detail
              FROM (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY x.dest, x.ev ORDER BY x.ord) AS rn
                      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_token, v_state, v_detail)
                           AS x(ord, dest, ev, att, tok, state, detail)) AS u
              LEFT JOIN outbox.outbox_deliveries AS d ON d.destination = u.dest AND d.event_id = u.ev
             CROSS JOIN LATERAL (
                    SELECT CASE WHEN u.state IS NOT NULL THEN NULL
                                WHEN u.rn > 1
                                THEN pg_catalog.format('delivery %s/%s appears more than once in this batch', u.dest, u.ev)
                                ELSE outbox._fence_problem(d, u.dest, u.ev, u.att, u.tok, v_now) END AS problem
                  ) AS f
           ) AS j;

    PERFORM outbox._quarantine_write(pg_catalog.array_agg(u.dest), pg_catalog.array_agg(u.ev), pg_catalog.array_agg(u.att),
                                     'non_retryable', pg_catalog.array_agg(u.reason),
                                     pg_catalog.array_agg(u.code), pg_catalog.array_agg(u.ref), v_now)
       FROM unnest(v_dest, v_event, v_attempt, v_reason, v_code, v_ref, v_state)
            AS u(dest, ev, att, reason, code, ref, state)
      WHERE u.state IS NULL
     HAVING pg_catalog.count(*) > 0;

    RETURN QUERY
    SELECT u.dest, u.ev, u.att, CASE WHEN u.state IS NULL THEN 'quarantined' ELSE 'rejected' END, u.state, u.detail
      FROM unnest(v_ord, v_dest, v_event, v_attempt, v_state, v_detail)
           AS u(ord, dest, ev, att, state, detail)
     ORDER BY u.ord;
END
$function$;

COMMENT ON FUNCTION outbox._quarantine_outcomes(outbox.outcome_items) IS
    'Private: the body of outbox.quarantine_deliveries for a parsed batch (outbox.outcome_items from either form: JSON or typed arrays); one call per batch (SPEC R-AK-9, HP-1, HP-2).';

REVOKE ALL ON FUNCTION outbox._quarantine_outcomes(outbox.outcome_items) FROM PUBLIC;
