-- A completeness proof never changes (SPEC R-OP-2, R-SEC-3): UPDATE, DELETE and TRUNCATE of
-- outbox.completeness_manifests raise OB202 for every role, the owner included - with the
-- refusal the archive and evidence tables use (outbox.tg_outbox_archive__immutable).
CREATE TRIGGER tg_completeness_manifests__immutable
    BEFORE UPDATE OR DELETE ON outbox.completeness_manifests
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
CREATE TRIGGER tg_completeness_manifests__no_truncate
    BEFORE TRUNCATE ON outbox.completeness_manifests
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_archive__immutable();
