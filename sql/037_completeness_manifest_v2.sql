-- CompletenessProofManifest@2 and a search that follows the active projection version
-- (issue 24 item 5; SPEC R-OP-2, R-OP-3, R-PV-2, R-PV-3):
--   * outbox._completeness_document gains p_manifest_version (default 2): the receipt anti-join of
--     @2 is taken against each projection's active version (a delivery to the active version must
--     be acknowledged; one frozen to a former version needs an inbox receipt of the active one)
--     and the document records those versions ("projectionVersions"); @1 is still derived, so
--     proofs taken before this migration stay verifiable;
--   * take_completeness_snapshot writes @2; check_completeness re-derives a stored proof in its
--     own version;
--   * search_exact_id matches only the active version's exact-id index rows and checks the
--     source gap against that version.
-- Nothing is backfilled; stored manifests are immutable and keep their version.
SET LOCAL ROLE outbox_owner;

DROP FUNCTION outbox.check_completeness(uuid);
DROP FUNCTION outbox.take_completeness_snapshot(json);
DROP FUNCTION outbox._completeness_document(text);
{{ template "functions/_completeness_document.sql" (dict "manifest_v2" true) }}
{{ template "functions/take_completeness_snapshot.sql" . }}
{{ template "functions/check_completeness.sql" . }}

DROP FUNCTION outbox.search_exact_id(text, text);
{{ template "functions/search_exact_id.sql" . }}

RESET ROLE;
