-- Guards of the projection version registry (SPEC §11b R-PV-1; OB202 like the other registries):
--   * outbox.projection_versions: the identity (projection_name, projection_version), the
--     semantic definition digest and registered_at never change; state, live_build_id and
--     live_build_token move only through the outbox functions (no role but the owner has table
--     privileges); no DELETE, no TRUNCATE. Every insert and state change writes one
--     outbox.projection_version_history row (tg_projection_versions__history).
--   * outbox.projection_version_history and outbox.projection_build_sources: append-only.
--   * outbox.projection_builds: build_id, the version, started_at and started_by never change;
--     an abandoned build is terminal (its token is dead for good); no DELETE, no TRUNCATE.
-- Caller: trigger functions, granted to nobody.
CREATE OR REPLACE FUNCTION outbox.tg_projection_versions__history()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state THEN
        INSERT INTO outbox.projection_version_history (projection_name, projection_version, state, changed_by)
        VALUES (NEW.projection_name, NEW.projection_version, NEW.state, session_user);
    END IF;
    RETURN NULL;
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_projection_versions__history() FROM PUBLIC;
