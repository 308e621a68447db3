CREATE OR REPLACE FUNCTION outbox.tg_kernel_dml__guarded()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_context text;
    v_nl      integer;
    v_rest    text;
    v_end     integer;
    v_stmt    text;
    v_frame   text[];
    v_src     text;
    v_pos     integer;
BEGIN
    -- line 1 of the call stack is this trigger; next must come the statement that fired it and
    -- the frame of the function that ran it - frames PostgreSQL writes. The statement text must
    -- be a whole statement of that function's own source (so a statement typed elsewhere cannot
    -- carry a forged frame inside a literal: it would have to be that function's statement).
    GET DIAGNOSTICS v_context = PG_CONTEXT;
    v_nl := pg_catalog.strpos(v_context, E'\n');
    IF v_nl > 0 THEN
        v_rest := pg_catalog.substr(v_context, v_nl + 1);
        IF pg_catalog.left(v_rest, 15) = 'SQL statement "' THEN
            v_end := pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ');
            IF v_end > 16 THEN
                v_stmt := pg_catalog.substr(v_rest, 16, v_end - 16);
                v_frame := pg_catalog.regexp_match(pg_catalog.split_part(pg_catalog.substr(v_rest, v_end + 2), E'\n', 1),
                               '^PL/pgSQL function ([a-z_]+\.[a-z_]+\([a-z ,\[\]]*\)) line [0-9]+ at [A-Za-z ]+$');
                IF v_frame IS NOT NULL AND v_frame[1] = ANY (TG_ARGV) THEN
                    SELECT p.prosrc INTO v_src FROM pg_catalog.pg_proc AS p WHERE p.oid = pg_catalog.to_regprocedure(v_frame[1]);
                    v_pos := pg_catalog.strpos(v_src, v_stmt);
                    IF v_pos > 0 AND pg_catalog.substr(v_src, v_pos + pg_catalog.length(v_stmt), 64) ~ '^\s*(;|INTO\s)' THEN
                        RETURN NULL;
                    END IF;
                END IF;
            END IF;
        END IF;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on %.% outside its kernel functions', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('only %s may %s these rows; the guard reads the call stack, never a session setting (SPEC R-SEC-3)',
                                         pg_catalog.array_to_string(TG_ARGV, ', '), pg_catalog.lower(TG_OP));
END
$function$;

COMMENT ON FUNCTION outbox.tg_kernel_dml__guarded() IS
    'Trigger (statement level): OB202 unless the statement that fired it is a statement of one of the functions named in the trigger arguments, run from that function (call stack, PG_CONTEXT; no session setting). SPEC R-SEC-3, issue 38.';

REVOKE ALL ON FUNCTION outbox.tg_kernel_dml__guarded() FROM PUBLIC;
