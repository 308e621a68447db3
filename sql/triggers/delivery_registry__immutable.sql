-- Registry immutability (SPEC R-SEC-3): definitions, their members and applicable events, and
-- destinations never change once registered; a definition's status and activated_at are the
-- only mutable registry metadata, and only through activate_delivery_set's transitions.
CREATE FUNCTION outbox.tg_registry__immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
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
    RAISE EXCEPTION 'immutability violation: % on outbox.% is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'OB202',
              DETAIL = 'registry rows are immutable; only a definition''s status/activated_at change, through activate_delivery_set';
END
$fn$;
REVOKE ALL ON FUNCTION outbox.tg_registry__immutable() FROM PUBLIC;

CREATE TRIGGER tg_delivery_set_versions__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_versions
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_members__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_members
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_applicable_events__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_applicable_events
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_destinations__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_destinations
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kinds__immutable BEFORE UPDATE OR DELETE ON outbox.receipt_kinds
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
