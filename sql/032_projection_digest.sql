-- Projection content digests and version comparison (SPEC §11b R-PV-4, §13; issue 24 item 3):
--   * outbox.projection_row_sources: per registered projection version, the relation (a view
--     the projection provides) whose rows (row_key text, row_document json|jsonb) are the
--     projection's content without apply times; registered by outbox.register_projection_rows
--     (outbox_registrar; insert-or-compare, OB801 another relation);
--   * outbox.projection_digest(name, version): jcs-sha256-v1 of the sorted
--     [{rowKey, rowSha256}] array - the same rows in any arrival order, with any apply times,
--     give the same digest; the version number is not part of it, so two versions compare;
--   * outbox.compare_projection_versions(name, a, b): digests, row counts, receipt anti-join
--     (events with a receipt under one version and not the other), open revision gaps, open
--     quarantine of deliveries targeting either version, and up to 10 differing row keys.
--   * inbox._inbox_check_version accepts receipts of an unversioned projection (none of its
--     versions registered in this database: a consumer's inbox in a database of its own) as
--     before migration 031, which refused them with OB802 and so broke every consumer whose
--     inbox does not share the outbox's database.
-- New table and functions; one private helper redefined.
SET LOCAL ROLE outbox_owner;

CREATE TABLE outbox.projection_row_sources (
    projection_name    text NOT NULL,
    projection_version integer NOT NULL,
    row_source         regclass NOT NULL,
    registered_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection_name, projection_version),
    FOREIGN KEY (projection_name, projection_version) REFERENCES outbox.projection_versions
);
COMMENT ON TABLE outbox.projection_row_sources IS
    'Per projection version, the relation of its content rows (row_key, row_document) that projection_digest reads (SPEC R-PV-4); insert-or-compare, never changed.';
CREATE TRIGGER tg_projection_row_sources__immutable BEFORE UPDATE OR DELETE ON outbox.projection_row_sources
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();

DROP FUNCTION inbox._inbox_check_version(text, integer, uuid);
{{ template "functions/_inbox_check_version.sql" . }}

{{ template "functions/_projection_rows.sql" . }}
{{ template "functions/register_projection_rows.sql" . }}
{{ template "functions/projection_digest.sql" . }}
{{ template "functions/compare_projection_versions.sql" . }}

RESET ROLE;
