-- Revision progress only moves forward (SPEC R-CO-3): an UPDATE must keep the key and raise
-- last_revision; DELETE and TRUNCATE are refused. A rebuilt projection uses a new version.
CREATE FUNCTION inbox.tg_inbox_revision_progress__monotonic() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP = 'UPDATE'
       AND (NEW.consumer_name, NEW.projection_name, NEW.projection_version, NEW.aggregate_id)
           IS NOT DISTINCT FROM (OLD.consumer_name, OLD.projection_name, OLD.projection_version, OLD.aggregate_id)
       AND NEW.last_revision > OLD.last_revision THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on inbox.inbox_revision_progress is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'revision progress only increases, through inbox.observe_revision (SPEC R-CO-3)';
END
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_revision_progress__monotonic() FROM PUBLIC;

CREATE TRIGGER tg_inbox_revision_progress__monotonic BEFORE UPDATE OR DELETE ON inbox.inbox_revision_progress
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_revision_progress__monotonic();
CREATE TRIGGER tg_inbox_revision_progress__monotonic_truncate BEFORE TRUNCATE ON inbox.inbox_revision_progress
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_revision_progress__monotonic();
