-- Gap records are kept (SPEC R-CO-3, R-OP-2): an open gap may only see later observations
-- (seen_revision up, last_seen_at, observation_count) and be closed once; a closed gap never
-- changes; no gap is deleted or truncated.
-- Exception (R-PV-3, migration 034): the DELETEs of outbox.drop_retired_projection for a retired
-- projection version (the context check below).
CREATE OR REPLACE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_context text;
    v_rest    text;
BEGIN
    -- R-PV-3: outbox.drop_retired_projection deletes the rows of a retired version. Admitted only
    -- when the statement below this trigger is a DELETE run directly by that function (a frame
    -- PostgreSQL writes; no session can forge it) and the row's version is retired.
    IF TG_OP = 'DELETE' THEN
        GET DIAGNOSTICS v_context = PG_CONTEXT;
        v_rest := pg_catalog.substr(v_context, pg_catalog.strpos(v_context, E'\n') + 1);
        IF pg_catalog.strpos(v_context, E'\n') > 0
           AND pg_catalog.starts_with(v_rest, 'SQL statement "DELETE FROM inbox.')
           AND pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ') > 0
           AND pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function ')
               = pg_catalog.strpos(v_rest, E'"\nPL/pgSQL function outbox.drop_retired_projection(text,integer) line ')
           AND EXISTS (SELECT 1 FROM outbox.projection_versions AS v
                        WHERE v.projection_name = OLD.projection_name AND v.projection_version = OLD.projection_version
                          AND v.state = 'retired') THEN
            RETURN OLD;
        END IF;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.closed_at IS NULL
       AND (NEW.consumer_name, NEW.projection_name, NEW.projection_version, NEW.aggregate_id,
            NEW.expected_revision, NEW.first_seen_at)
           IS NOT DISTINCT FROM
           (OLD.consumer_name, OLD.projection_name, OLD.projection_version, OLD.aggregate_id,
            OLD.expected_revision, OLD.first_seen_at)
       AND NEW.seen_revision >= OLD.seen_revision
       AND NEW.observation_count >= OLD.observation_count THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_revision_gaps is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'gap records are kept; only an open gap changes, through inbox.observe_revision (SPEC R-CO-3)';
END
$function$;

REVOKE ALL ON FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable() FROM PUBLIC;
