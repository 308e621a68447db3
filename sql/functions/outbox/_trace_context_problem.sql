-- outbox._trace_context_problem(p_traceparent text, p_tracestate text) RETURNS text  (private, SPEC R-DP-7)
-- Purpose: the one rule for a W3C Trace Context given at append (https://www.w3.org/TR/trace-context/):
--   NULL when (traceparent, tracestate) may be stored, else the defect, for the caller's DETAIL.
--   traceparent: version-traceid-parentid-flags in lower-case hex; version ff is invalid; version
--   00 is exactly 55 characters; a later version may carry a "-" suffix (forward compatible, as
--   the recommendation asks), 256 characters at most; trace id and parent id not all zeros.
--   tracestate: at most 512 characters and 32 list members, each key=value with the
--   recommendation's key (simple or tenant@system) and value grammar; empty members and
--   optional whitespace around commas allowed; only with a traceparent. The empty string is
--   treated as no tracestate by the callers (they store NULL).
-- SQLSTATEs: none (the caller raises 22023 with the returned detail). IMMUTABLE.
-- Callers: outbox.append_events; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._trace_context_problem(p_traceparent text, p_tracestate text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_member text;
    v_count  integer := 0;
BEGIN
    IF p_traceparent IS NULL THEN
        IF p_tracestate IS NOT NULL AND p_tracestate <> '' THEN
            RETURN 'tracestate without traceparent';
        END IF;
        RETURN NULL;
    END IF;
    IF pg_catalog.length(p_traceparent) > 256
       OR p_traceparent COLLATE "C" !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?$' THEN
        RETURN 'traceparent must be version-traceid-parentid-flags in lower-case hex (W3C Trace Context)';
    END IF;
    IF pg_catalog.left(p_traceparent, 2) = 'ff' THEN
        RETURN 'traceparent version ff is invalid';
    END IF;
    IF pg_catalog.left(p_traceparent, 2) = '00' AND pg_catalog.length(p_traceparent) <> 55 THEN
        RETURN 'traceparent version 00 has exactly 55 characters';
    END IF;
    IF pg_catalog.substr(p_traceparent, 4, 32) = '00000000000000000000000000000000' THEN
        RETURN 'traceparent trace id is all zeros';
    END IF;
    IF pg_catalog.substr(p_traceparent, 37, 16) = '0000000000000000' THEN
        RETURN 'traceparent parent id is all zeros';
    END IF;
    IF p_tracestate IS NULL OR p_tracestate = '' THEN
        RETURN NULL;
    END IF;
    IF pg_catalog.length(p_tracestate) > 512 THEN
        RETURN 'tracestate is longer than 512 characters';
    END IF;
    FOREACH v_member IN ARRAY pg_catalog.string_to_array(p_tracestate, ',') LOOP
        v_member := pg_catalog.btrim(v_member, E' \t');
        CONTINUE WHEN v_member = '';
        v_count := v_count + 1;
        IF v_member COLLATE "C" !~ ('^([a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})'
                                    '=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$') THEN
            RETURN pg_catalog.format('tracestate member %s is not key=value (W3C Trace Context)', v_count);
        END IF;
    END LOOP;
    IF v_count > 32 THEN
        RETURN 'tracestate has more than 32 members';
    END IF;
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION outbox._trace_context_problem(text, text) IS
    'Private: NULL when a W3C traceparent/tracestate pair may be stored beside an event, else the defect (SPEC R-DP-7).';

REVOKE ALL ON FUNCTION outbox._trace_context_problem(text, text) FROM PUBLIC;
