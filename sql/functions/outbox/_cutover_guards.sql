-- outbox._cutover_guards(p_boundary_id uuid, p_destinations text[]) RETURNS jsonb
--   (private helper, SPEC §11b R-PV-2 (c), R-PV-5)
-- The readiness guards of a frozen boundary's shadow (consumer C, projection P, version S of the
-- boundary), each a count that must be 0 for a cutover: boundaryMismatch (the document is not
-- canonical, not its sha256, or its member digests differ from the member rows),
-- boundaryNotHandedOut (members the build's ledger lacks), missingReceipts (the receipt
-- anti-join: events of outbox.event_source in the source filter - boundary members and every
-- later event alike - without a receipt of (C, P, S) for that envelope digest),
-- missingObservationReceipts (likewise for observations, when the filter has them), openGaps
-- (open revision gaps of (C, P, S)), openQuarantine and leasesInFlight (deliveries of
-- p_destinations quarantined / leased), unsupportedSchemas (hot deliveries routed to P whose
-- event pair is outside the filter); plus checkedBoundaryEvents / checkedLaterEvents.
-- Cost: scans every event once (operator call). Locking: none. Caller: cutover_projection,
-- candidate_progress (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._cutover_guards(p_boundary_id uuid, p_destinations text[])
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    b        outbox.cutover_boundaries%ROWTYPE;
    v_out    jsonb;
    v_digest jsonb;
BEGIN
    SELECT * INTO STRICT b FROM outbox.cutover_boundaries AS c WHERE c.boundary_id = p_boundary_id;
    SELECT pg_catalog.jsonb_object_agg(k.kind, pg_catalog.jsonb_build_object('count', coalesce(a.n, 0),
               'setSha256', outbox._sha256_hex(coalesce(a.lines, ''))))
      INTO v_digest
      FROM (VALUES ('event'), ('observation')) AS k(kind)
      LEFT JOIN (SELECT m.source_kind, pg_catalog.count(*) AS n,
                        pg_catalog.string_agg(m.source_id::text || ' ' || m.envelope_sha256 || E'\n', '' ORDER BY m.source_id) AS lines
                   FROM outbox.cutover_boundary_members AS m
                  WHERE m.boundary_id = p_boundary_id
                  GROUP BY m.source_kind) AS a ON a.source_kind = k.kind;

    WITH scope AS (
        SELECT e.event_id, e.event_envelope_sha256,
               EXISTS (SELECT 1 FROM outbox.cutover_boundary_members AS m
                        WHERE m.boundary_id = p_boundary_id AND m.source_kind = 'event' AND m.source_id = e.event_id) AS in_boundary,
               EXISTS (SELECT 1 FROM inbox.inbox_receipts AS r
                        WHERE r.consumer_name = b.consumer_name AND r.projection_name = b.projection_name
                          AND r.projection_version = b.projection_version AND r.event_id = e.event_id
                          AND r.event_envelope_sha256 = e.event_envelope_sha256) AS has_receipt
          FROM outbox.event_source AS e
         WHERE EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(b.source_filter->'eventTypes') AS f
                        WHERE f->>'eventType' = e.event_type AND f->>'eventSchemaVersion' = e.schema_version)
    )
    SELECT pg_catalog.jsonb_build_object(
        'boundaryMismatch',
            CASE WHEN outbox._sha256_hex(b.document) <> b.boundary_sha256
                      OR outbox.jcs_canonicalize(b.document::json) <> b.document
                      OR (b.document::jsonb)->'members' IS DISTINCT FROM v_digest THEN 1 ELSE 0 END,
        'boundaryNotHandedOut',
            (SELECT pg_catalog.count(*) FROM outbox.cutover_boundary_members AS m
              WHERE m.boundary_id = p_boundary_id
                AND NOT EXISTS (SELECT 1 FROM outbox.projection_build_sources AS l
                                 WHERE l.build_id = b.build_id AND l.source_kind = m.source_kind AND l.source_id = m.source_id)),
        'missingReceipts', (SELECT pg_catalog.count(*) FROM scope AS s WHERE NOT s.has_receipt),
        'missingObservationReceipts',
            CASE WHEN (b.source_filter->>'observations')::boolean THEN
                 (SELECT pg_catalog.count(*) FROM intake.observations AS o
                   WHERE NOT EXISTS (SELECT 1 FROM inbox.observation_receipts AS r
                                      WHERE r.consumer_name = b.consumer_name AND r.projection_name = b.projection_name
                                        AND r.projection_version = b.projection_version AND r.observation_id = o.observation_id))
                 ELSE 0 END,
        'openGaps',
            (SELECT pg_catalog.count(*) FROM inbox.inbox_revision_gaps AS g
              WHERE g.consumer_name = b.consumer_name AND g.projection_name = b.projection_name
                AND g.projection_version = b.projection_version AND g.closed_at IS NULL),
        'openQuarantine',
            (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS d
              WHERE d.destination = ANY (p_destinations) AND d.status = 'quarantined'),
        'leasesInFlight',
            (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS d
              WHERE d.destination = ANY (p_destinations) AND d.status = 'leased'),
        'unsupportedSchemas',
            (SELECT pg_catalog.count(*) FROM outbox.outbox_deliveries AS d
               JOIN outbox.outbox_events AS e ON e.event_id = d.event_id
              WHERE d.required_projection_name = b.projection_name
                AND NOT EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(b.source_filter->'eventTypes') AS f
                                 WHERE f->>'eventType' = e.event_type AND f->>'eventSchemaVersion' = e.schema_version)),
        'checkedBoundaryEvents', (SELECT pg_catalog.count(*) FROM scope AS s WHERE s.in_boundary),
        'checkedLaterEvents', (SELECT pg_catalog.count(*) FROM scope AS s WHERE NOT s.in_boundary))
      INTO v_out;
    RETURN v_out;
END
$function$;

COMMENT ON FUNCTION outbox._cutover_guards(uuid, text[]) IS
    'Private: the readiness guard counts of a frozen boundary (boundary integrity, catch-up, receipt anti-join over boundary and later events, gaps, quarantine, leases, unsupported schemas). SPEC R-PV-2.';

REVOKE ALL ON FUNCTION outbox._cutover_guards(uuid, text[]) FROM PUBLIC;
