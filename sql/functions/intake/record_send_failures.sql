-- intake.record_send_failures(failed int, window_start timestamptz, window_end timestamptz,
--   reason text) RETURNS void  (public, SPEC R-OB-5, §13)
-- Purpose: the calling workload reports how many observations it could not send in a window
--   (like client discard reports); counted as known send failures in the health windows that
--   the report's window_start falls in. The workload comes from the session role (OB704).
-- Reason: a low-cardinality literal ([a-z0-9][a-z0-9._:-]{0,63}, e.g. timeout, queue_full,
--   quota), never a payload.
-- SQLSTATEs: OB704 the calling role is not a registered workload; 22023 failed < 1 or > 10^9,
--   a window that is empty, longer than a day or ends more than 5 minutes in the future, a
--   reason out of form.
-- Caller: outbox_intake.
CREATE OR REPLACE FUNCTION intake.record_send_failures(p_failed integer, p_window_start timestamp with time zone, p_window_end timestamp with time zone, p_reason text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_w intake.workloads := intake._intake_caller();
BEGIN
    IF p_failed IS NULL OR p_failed NOT BETWEEN 1 AND 1000000000 THEN
        RAISE EXCEPTION 'intake: failed must be 1..1000000000' USING ERRCODE = '22023';
    END IF;
    IF p_window_start IS NULL OR p_window_end IS NULL OR p_window_end <= p_window_start
       OR p_window_end - p_window_start > interval '1 day'
       OR p_window_end > pg_catalog.now() + interval '5 minutes' THEN
        RAISE EXCEPTION 'intake: send failure window out of bounds'
            USING ERRCODE = '22023', DETAIL = 'window_start < window_end, at most one day long, not ending in the future';
    END IF;
    IF p_reason IS NULL OR p_reason !~ '^[a-z0-9][a-z0-9._:-]{0,63}$' THEN
        RAISE EXCEPTION 'intake: reason must be a low-cardinality literal [a-z0-9._:-]{1,64}' USING ERRCODE = '22023';
    END IF;
    INSERT INTO intake.send_failures (workload_principal_id, failed, window_start, window_end, reason)
    VALUES (v_w.workload_principal_id, p_failed, p_window_start, p_window_end, p_reason);
END
$function$;

COMMENT ON FUNCTION intake.record_send_failures(integer, timestamp with time zone, timestamp with time zone, text) IS
    'The calling workload reports observations it could not send in a window (SPEC R-OB-5).';

REVOKE ALL ON FUNCTION intake.record_send_failures(integer, timestamp with time zone, timestamp with time zone, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION intake.record_send_failures(integer, timestamp with time zone, timestamp with time zone, text) TO outbox_intake;
