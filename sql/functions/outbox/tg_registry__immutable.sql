-- outbox.tg_registry__immutable(): the function of the registry immutability triggers
-- on the registry and kernel tables of outbox and inbox (sql/triggers/outbox/, sql/triggers/inbox/).
-- Its message names the table with its schema (inbox.consumer_roles is guarded too). SPEC R-SEC-3.
CREATE OR REPLACE FUNCTION outbox.tg_registry__immutable()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'delivery_set_versions' THEN
        IF (NEW.delivery_set_version, NEW.definition_schema_version, NEW.digest_algorithm_version,
            NEW.definition_digest, NEW.definition, NEW.source_release, NEW.registered_at)
           IS NOT DISTINCT FROM
           (OLD.delivery_set_version, OLD.definition_schema_version, OLD.digest_algorithm_version,
            OLD.definition_digest, OLD.definition, OLD.source_release, OLD.registered_at)
           AND NEW.status IN ('active', 'retired') THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on %.% is not allowed', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'registry rows are immutable; only a definition''s status/activated_at change, through activate_delivery_set';
END
$function$;

REVOKE ALL ON FUNCTION outbox.tg_registry__immutable() FROM PUBLIC;
