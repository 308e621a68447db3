-- tg_completeness_manifests__immutable: a completeness proof never changes (SPEC R-OP-2,
-- R-SEC-3). UPDATE, DELETE and TRUNCATE raise OB202 for every role, the owner included.
CREATE FUNCTION outbox.tg_completeness_manifests__immutable()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'outbox.completeness_manifests is immutable'
        USING ERRCODE = 'OB202',
              DETAIL = pg_catalog.format('%s on outbox.completeness_manifests is not allowed: a manifest is content-addressed and never changes', TG_OP);
END
$fn$;

COMMENT ON FUNCTION outbox.tg_completeness_manifests__immutable() IS
    'Trigger: outbox.completeness_manifests is immutable (UPDATE/DELETE/TRUNCATE raise OB202) (SPEC R-OP-2, R-SEC-3).';
REVOKE ALL ON FUNCTION outbox.tg_completeness_manifests__immutable() FROM PUBLIC;

CREATE TRIGGER tg_completeness_manifests__immutable
    BEFORE UPDATE OR DELETE ON outbox.completeness_manifests
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_completeness_manifests__immutable();
CREATE TRIGGER tg_completeness_manifests__no_truncate
    BEFORE TRUNCATE ON outbox.completeness_manifests
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_completeness_manifests__immutable();
