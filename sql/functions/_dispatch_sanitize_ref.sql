-- outbox._dispatch_sanitize_ref(p_ref text) RETURNS text  (private, SPEC R-AK-7, R-DP-5)
-- Purpose: sanitize a caller-supplied error reference before it is stored in
--   outbox_deliveries.last_error_ref / outbox_delivery_attempt_finishes.sanitized_error_ref:
--   control characters (incl. newlines, tabs, DEL) become spaces, runs of whitespace collapse,
--   the result is trimmed and cut to 200 characters; empty -> NULL. It is a reference (an id, a
--   status line, a request id), never payload content: callers must not pass payload bytes; the
--   cap keeps an accidental payload from being copied whole.
-- SQLSTATEs: none. IMMUTABLE.
-- Caller: outbox.retry_delivery; granted to nobody.
CREATE FUNCTION outbox._dispatch_sanitize_ref(p_ref text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
-- no SET clause on purpose: a plain SQL expression is inlined into the calling statement, so a
-- batch sanitizes its refs without one function call per item (HP-1); every name is
-- schema-qualified.
AS $fn$
    SELECT nullif(
               pg_catalog.left(
                   pg_catalog.btrim(
                       pg_catalog.regexp_replace(
                           pg_catalog.regexp_replace(p_ref, '[[:cntrl:]]', ' ', 'g'),
                           '\s+', ' ', 'g')),
                   200),
               '')
$fn$;

COMMENT ON FUNCTION outbox._dispatch_sanitize_ref(text) IS
    'Private: strip control characters, collapse whitespace, trim and cap an error reference at 200 characters; empty -> NULL (SPEC R-AK-7).';
REVOKE ALL ON FUNCTION outbox._dispatch_sanitize_ref(text) FROM PUBLIC;
