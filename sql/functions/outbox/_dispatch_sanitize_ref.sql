-- outbox._dispatch_sanitize_ref(p_ref text) RETURNS text  (private, SPEC R-AK-7, R-DP-5)
-- Purpose: sanitize a caller-supplied error reference before it is stored in
--   outbox_deliveries.last_error_ref / outbox_delivery_attempt_finishes.sanitized_error_ref:
--   control characters (incl. newlines, tabs, DEL) become spaces, runs of whitespace collapse,
--   the result is trimmed and cut to 200 characters; empty -> NULL. It is a reference (an id, a
--   status line, a request id), never payload content: callers must not pass payload bytes; the
--   cap keeps an accidental payload from being copied whole.
-- SQLSTATEs: none. IMMUTABLE.
-- Caller: outbox.retry_delivery; granted to nobody.
CREATE OR REPLACE FUNCTION outbox._dispatch_sanitize_ref(p_ref text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT nullif(
               pg_catalog.left(
                   pg_catalog.btrim(
                       pg_catalog.regexp_replace(
                           pg_catalog.regexp_replace(p_ref, '[[:cntrl:]]', ' ', 'g'),
                           '\s+', ' ', 'g')),
                   200),
               '')
$function$;

COMMENT ON FUNCTION outbox._dispatch_sanitize_ref(text) IS
    'Private: strip control characters, collapse whitespace, trim and cap an error reference at 200 characters; empty -> NULL (SPEC R-AK-7).';

REVOKE ALL ON FUNCTION outbox._dispatch_sanitize_ref(text) FROM PUBLIC;
