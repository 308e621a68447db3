-- Gap records are kept (SPEC R-CO-3, R-OP-2): an open gap may only see later observations
-- (seen_revision up, last_seen_at, observation_count) and be closed once; a closed gap never
-- changes; no gap is deleted or truncated.
CREATE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
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
$fn$;
REVOKE ALL ON FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable() FROM PUBLIC;

CREATE TRIGGER tg_inbox_revision_gaps__closed_immutable BEFORE UPDATE OR DELETE ON inbox.inbox_revision_gaps
    FOR EACH ROW EXECUTE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();
CREATE TRIGGER tg_inbox_revision_gaps__closed_immutable_truncate BEFORE TRUNCATE ON inbox.inbox_revision_gaps
    FOR EACH STATEMENT EXECUTE FUNCTION inbox.tg_inbox_revision_gaps__closed_immutable();
