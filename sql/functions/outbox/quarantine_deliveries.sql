-- outbox.quarantine_deliveries(p_items json)
-- RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
-- (public, SPEC R-AK-6, R-AK-7, R-AK-9, §13; how it works: docs/contract.md "Batch outcomes")
-- Purpose: many non-retryable outcomes in one call and one transaction. p_items: a JSON array (at
--   most 1000) of {destination, eventId, attemptId, leaseToken, reason, errorCode, errorRef?},
--   parsed once by outbox._outcome_items: reason a non-retryable code of outbox.error_codes,
--   errorCode any code there, errorRef (sanitized) kept on the finish. One row per item in input
--   order: quarantined (non_retryable finish, terminal state, quarantine row with the event
--   digest) or rejected with sqlstate and detail: 22023 (shape, reason, code), OB001 (fencing; a
--   delivery named twice). Set-based: lock, judge, outbox._quarantine_write. Time:
--   clock_timestamp() once per call.
-- SQLSTATEs (whole call): 22023 not a JSON array or more than 1000 items; OB201 unreadable.
-- Caller: outbox_dispatcher (also through outbox.quarantine_delivery, a batch of one).
CREATE OR REPLACE FUNCTION outbox.quarantine_deliveries(p_items json)
 RETURNS TABLE(destination text, event_id uuid, attempt_id uuid, outcome text, sqlstate text, detail text)
 LANGUAGE plpgsql
 SECURITY DEFINER
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
      FROM outbox._outcome_items(p_items, 'quarantine_deliveries') AS p;
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

COMMENT ON FUNCTION outbox.quarantine_deliveries(json) IS
    'Record many non-retryable outcomes in one transaction, each fenced like quarantine_delivery; one row per item in input order: quarantined | rejected (sqlstate, detail). SPEC R-AK-6, R-AK-9.';

REVOKE ALL ON FUNCTION outbox.quarantine_deliveries(json) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.quarantine_deliveries(json) TO outbox_dispatcher;
