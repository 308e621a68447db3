-- mailbox._mailbox_source(p_source text, p_lock boolean) RETURNS mailbox.sources
-- (private, SPEC §10, D-4)
-- Purpose: the registered source row of p_source; with p_lock the row is locked FOR UPDATE
--   (record_discovery serializes on it: W and the holes of one source change under that row
--   lock, never under an advisory lock, R-SEC-5).
-- SQLSTATEs: 22023 p_source not a literal (^[a-z0-9][a-z0-9._@-]*$, at most 200 characters) or
--   not registered.
-- Caller: the mailbox functions; granted to nobody.
CREATE OR REPLACE FUNCTION mailbox._mailbox_source(p_source text, p_lock boolean)
 RETURNS mailbox.sources
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_row mailbox.sources;
BEGIN
    IF p_source IS NULL OR p_source !~ '^[a-z0-9][a-z0-9._@-]*$' OR pg_catalog.length(p_source) > 200 THEN
        RAISE EXCEPTION 'mailbox: invalid source'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('source %L must match ^[a-z0-9][a-z0-9._@-]*$ and have at most 200 characters', p_source);
    END IF;
    IF p_lock THEN
        SELECT s.* INTO v_row FROM mailbox.sources AS s WHERE s.source = p_source FOR UPDATE;
    ELSE
        SELECT s.* INTO v_row FROM mailbox.sources AS s WHERE s.source = p_source;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mailbox: unknown source'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('source %L is not registered (mailbox.register_source)', p_source);
    END IF;
    RETURN v_row;
END
$function$;

COMMENT ON FUNCTION mailbox._mailbox_source(text, boolean) IS
    'Private: the registered source row (optionally locked FOR UPDATE); 22023 for an invalid or unknown source.';

REVOKE ALL ON FUNCTION mailbox._mailbox_source(text, boolean) FROM PUBLIC;
