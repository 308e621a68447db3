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
CREATE OR REPLACE FUNCTION outbox.tg_projection_registry__guarded()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- nested IFs: an expression naming NEW's columns is prepared only for the table that has them
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'projection_versions' THEN
        IF (NEW.projection_name, NEW.projection_version, NEW.semantic_definition_sha256, NEW.registered_at)
           IS NOT DISTINCT FROM
           (OLD.projection_name, OLD.projection_version, OLD.semantic_definition_sha256, OLD.registered_at) THEN
            RETURN NEW;
        END IF;
    ELSIF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'projection_builds' THEN
        IF (NEW.build_id, NEW.projection_name, NEW.projection_version, NEW.started_at, NEW.started_by)
           IS NOT DISTINCT FROM
           (OLD.build_id, OLD.projection_name, OLD.projection_version, OLD.started_at, OLD.started_by)
           AND OLD.state <> 'abandoned' THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on %.% is not allowed', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'projection version registry rows keep their identity; state moves only through the outbox projection functions (SPEC R-PV-1)';
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_projection_registry__guarded() FROM PUBLIC;
