-- outbox.append_events(events json, canonical_texts text[] DEFAULT NULL,
--                      event_envelope_sha256s text[] DEFAULT NULL)
--   RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count int)
-- Purpose: append many EventEnvelope@1 objects (a JSON array) inside the caller's business
--   transaction, with exactly the rules of outbox.append_event (SPEC §3.2, §13, R-AK-9) — which
--   is this function called with a one-element array: there is one copy of every rule.
--   Envelope and digest rules (D-2, D-3, R-AP-3, R-AP-7): outbox._append_validate. Then, per
--   element in input order: an ACTIVE delivery-set definition exists and the pair is applicable
--   under it (R-AP-1); its quartet is frozen on the event (R-AP-2); an eventId that already
--   exists with the same digest is an idempotent re-append (nothing is written, its row comes
--   back), with another digest OB105; an eventId that was archived (outbox.archived_events,
--   SPEC R-RT-1) is OB105 whatever its digest (one primary-key probe per element); the same eventId twice in one call with different digests
--   is OB105 (with the same digest it is appended once); a new event's pair has at least one
--   mandatory member. Set-based: one INSERT … SELECT for the events and one for their pending
--   deliveries (one per mandatory member, R-AP-4); channel outbox_delivery is notified once per
--   destination per call (delivered on COMMIT). The deferred constraint triggers prove every
--   event's delivery set at COMMIT (R-AP-5).
-- Digest paths (D-2): canonical_texts and event_envelope_sha256s, when given, are parallel to
--   events (index 1 = first element); an element with both NULL is canonicalized by the
--   database. The database never stores a digest it did not verify.
-- Returns: one row per element, in input order: the event id, its digest, and its number of
--   deliveries (for an idempotent re-append, the deliveries it already has).
-- Raises (any invalid element fails the whole call; the caller's transaction decides):
--   OB103 no active definition / pair not applicable / no mandatory member; OB105 envelope
--   invalid (missing/unknown field, wrong type, refinement, size, caller digest differs, eventId
--   reused with other content, eventId archived); OB201 not canonicalizable (also a canonical text that is not
--   exactly the canonical form of an acceptable document). The first element (input order) that
--   breaks an envelope or digest rule raises, then the first that breaks a definition rule.
-- Locking: row locks of the inserted events/deliveries; a concurrent append of the same new
--   eventId waits for this transaction and then fails on the primary key. For a per_aggregate
--   destination, the open head of each aggregate chain it appends behind is held FOR SHARE (in
--   destination, event_id order) until commit: new revisions behind it are parked (available_at
--   'infinity', R-CL-6) and released by outbox._release_successors when the head ends.
-- Caller: outbox_producer.
CREATE FUNCTION outbox.append_events(
    p_events json,
    p_canonical_texts text[] DEFAULT NULL,
    p_event_envelope_sha256s text[] DEFAULT NULL
) RETURNS TABLE (event_id uuid, event_envelope_sha256 text, delivery_count integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_count     integer;
    v_max_bytes bigint;
BEGIN
    IF p_events IS NULL THEN
        PERFORM outbox._envelope_fail('events is NULL');
    END IF;
    IF pg_catalog.json_typeof(p_events) <> 'array' THEN
        PERFORM outbox._envelope_fail('events must be a JSON array of EventEnvelope@1 objects');
    END IF;
    v_count := pg_catalog.json_array_length(p_events);
    IF (p_canonical_texts IS NULL) <> (p_event_envelope_sha256s IS NULL) THEN
        PERFORM outbox._envelope_fail('canonical_texts and event_envelope_sha256s go together: pass both or neither');
    END IF;
    IF p_canonical_texts IS NOT NULL AND v_count > 0
       AND (pg_catalog.array_ndims(p_canonical_texts) IS DISTINCT FROM 1
            OR pg_catalog.array_ndims(p_event_envelope_sha256s) IS DISTINCT FROM 1
            OR pg_catalog.array_lower(p_canonical_texts, 1) <> 1
            OR pg_catalog.array_lower(p_event_envelope_sha256s, 1) <> 1
            OR pg_catalog.array_length(p_canonical_texts, 1) <> v_count
            OR pg_catalog.array_length(p_event_envelope_sha256s, 1) <> v_count) THEN
        PERFORM outbox._envelope_fail('canonical_texts and event_envelope_sha256s must have one entry per event, from index 1');
    END IF;
    SELECT k.value INTO v_max_bytes FROM outbox.kernel_settings k WHERE k.name = 'max_payload_bytes';

    RETURN QUERY
    WITH v AS MATERIALIZED (
        -- The envelope and digest rules, element by element in input order (the first break raises).
        SELECT e.ord, (e.r).*
          FROM (SELECT a.ord::integer AS ord,
                       outbox._append_validate(a.raw, p_canonical_texts[a.ord::integer],
                                               p_event_envelope_sha256s[a.ord::integer], v_max_bytes,
                                               CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', a.ord - 1)
                                                    ELSE '' END) AS r
                  FROM pg_catalog.json_array_elements(p_events) WITH ORDINALITY AS a(raw, ord)
                OFFSET 0) AS e
    ), c AS MATERIALIZED (
        -- (scalar subqueries, not joins: one primary-key lookup per element whatever the
        -- planner believes about the tables' sizes when the plan is cached)
        SELECT v.*, a.delivery_set_version, a.definition_schema_version, a.digest_algorithm_version,
               a.definition_digest,
               (SELECT x.event_envelope_sha256 FROM outbox.outbox_events x WHERE x.event_id = v.event_id) AS existing_sha256,
               -- R-RT-1: one primary-key probe of the archive per element
               EXISTS (SELECT 1 FROM outbox.archived_events x WHERE x.event_id = v.event_id) AS archived,
               (SELECT pg_catalog.count(*) FROM outbox.delivery_set_members m
                 WHERE m.delivery_set_version = a.delivery_set_version AND m.event_type = v.event_type
                   AND m.event_schema_version = v.schema_version AND m.mandatory)::integer AS members,
               pg_catalog.min(v.event_envelope_sha256) OVER same_id AS min_sha256,
               pg_catalog.max(v.event_envelope_sha256) OVER same_id AS max_sha256,
               pg_catalog.min(v.ord) OVER same_id AS first_ord
          FROM v
          LEFT JOIN outbox.delivery_set_versions a ON a.status = 'active'
        WINDOW same_id AS (PARTITION BY v.event_id)
    ), checked AS MATERIALIZED (
        -- The definition rules, element by element in input order; the first break raises.
        SELECT o.*
          FROM (SELECT c.*, CASE WHEN v_count > 1 THEN pg_catalog.format('events[%s]: ', c.ord - 1) ELSE '' END AS label
                  FROM c ORDER BY c.ord) AS o
         WHERE (CASE
                  WHEN o.delivery_set_version IS NULL THEN
                      outbox._append_fail('OB103', 'no active delivery-set definition', NULL,
                          'register and activate a delivery set (outboxctl release register / activate)')
                  WHEN NOT EXISTS (SELECT 1 FROM outbox.delivery_set_applicable_events ae
                                    WHERE ae.delivery_set_version = o.delivery_set_version
                                      AND ae.event_type = o.event_type AND ae.event_schema_version = o.schema_version) THEN
                      outbox._append_fail('OB103', 'event pair not applicable under the active delivery set',
                          o.label || pg_catalog.format('(%s, %s) is not applicable in delivery set version %s',
                                            o.event_type, o.schema_version, o.delivery_set_version), NULL)
                  WHEN o.archived THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s was archived by the retention procedure and can never be appended again', o.event_id), NULL)
                  WHEN o.existing_sha256 <> o.event_envelope_sha256 THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s already exists with a different envelope digest', o.event_id), NULL)
                  WHEN o.min_sha256 <> o.max_sha256 THEN
                      outbox._append_fail('OB105', 'envelope invalid',
                          o.label || pg_catalog.format('eventId %s appears more than once with different envelope digests', o.event_id), NULL)
                  WHEN o.existing_sha256 IS NULL AND o.members = 0 THEN
                      outbox._append_fail('OB103', 'no mandatory member for this event pair',
                          o.label || pg_catalog.format('(%s, %s) has no mandatory member in delivery set version %s',
                                            o.event_type, o.schema_version, o.delivery_set_version), NULL)
                END) IS NULL
    ), fresh AS MATERIALIZED (
        -- new events, each once even when the call repeats it
        SELECT k.* FROM checked k WHERE k.existing_sha256 IS NULL AND k.ord = k.first_ord
    ), chain AS MATERIALIZED (
        -- per_aggregate destinations (R-CL-6, R-CL-7): a new delivery that waits behind an earlier
        -- revision of its aggregate - open in the table, or earlier in this call - is parked at
        -- available_at = 'infinity', outside the claim's index range, so blocked chains cost a
        -- claim nothing; outbox._release_successors makes it claimable when the head ends.
        SELECT f.event_id, m.destination, f.aggregate_id, f.aggregate_revision,
               pg_catalog.row_number() OVER (PARTITION BY m.destination, f.aggregate_id
                                             ORDER BY f.aggregate_revision, f.ord) AS in_call
          FROM fresh f
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = f.delivery_set_version AND m.event_type = f.event_type
           AND m.event_schema_version = f.schema_version AND m.mandatory
          JOIN outbox.delivery_destinations dd ON dd.destination = m.destination AND dd.ordering = 'per_aggregate'
    ), heads AS MATERIALIZED (
        -- the lowest open revision of each such chain
        SELECT h.destination, h.event_id
          FROM (SELECT DISTINCT c.destination, c.aggregate_id FROM chain c) AS k
         CROSS JOIN LATERAL (
                SELECT o.destination, o.event_id
                  FROM outbox.outbox_deliveries o
                 WHERE o.destination = k.destination AND o.aggregate_id = k.aggregate_id
                   AND o.status IN ('pending', 'leased')
                 ORDER BY o.aggregate_revision
                 LIMIT 1) AS h
    ), held AS MATERIALIZED (
        -- held FOR SHARE until commit (in the key order outcome functions lock in): the head
        -- cannot become terminal - and release its successors - before this transaction's parked
        -- rows are visible; one that became terminal meanwhile drops out here (re-checked).
        SELECT d.destination, d.aggregate_id, d.aggregate_revision
          FROM outbox.outbox_deliveries d
          JOIN heads ON d.destination = heads.destination AND d.event_id = heads.event_id
         WHERE d.status IN ('pending', 'leased')
         ORDER BY d.destination, d.event_id
           FOR SHARE OF d
    ), parked AS MATERIALIZED (
        SELECT c.event_id, c.destination
          FROM chain c
         WHERE c.in_call > 1
            OR EXISTS (SELECT 1 FROM held h
                        WHERE h.destination = c.destination AND h.aggregate_id = c.aggregate_id
                          AND h.aggregate_revision < c.aggregate_revision)
    ), inserted_events AS (
        INSERT INTO outbox.outbox_events
            (event_id, event_type, schema_version, delivery_set_version, delivery_set_definition_schema_version,
             delivery_set_definition_digest_algorithm_version, delivery_set_definition_digest,
             aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id, project_id,
             correlation_id, causation_id, operation_id, event_payload,
             event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, event_envelope_canonical)
        SELECT f.event_id, f.event_type, f.schema_version, f.delivery_set_version, f.definition_schema_version,
               f.digest_algorithm_version, f.definition_digest,
               f.aggregate_id, f.aggregate_revision, f.tenant_kind, f.tenant_id, f.workspace_id, f.project_id,
               f.correlation_id, f.causation_id, f.operation_id, f.event_payload,
               'jcs-sha256-v1', f.event_envelope_sha256, f.occurred_at, f.event_envelope_canonical
          FROM fresh f
        RETURNING outbox_events.event_id
    ), inserted_deliveries AS (
        -- one pending delivery per mandatory member (R-AP-4, R-AP-6)
        INSERT INTO outbox.outbox_deliveries
            (destination, event_id, delivery_set_version, consumer_name, expected_receipt_type,
             expected_receipt_schema_version, required_projection_name, required_projection_version,
             mandatory, aggregate_id, aggregate_revision, available_at)
        SELECT m.destination, f.event_id, m.delivery_set_version, m.consumer_name, m.expected_receipt_type,
               m.expected_receipt_schema_version, m.projection_name, m.projection_version,
               true, f.aggregate_id, f.aggregate_revision,
               CASE WHEN EXISTS (SELECT 1 FROM parked p WHERE p.event_id = f.event_id AND p.destination = m.destination)
                    THEN 'infinity'::timestamptz ELSE pg_catalog.now() END
          FROM fresh f
          JOIN outbox.delivery_set_members m
            ON m.delivery_set_version = f.delivery_set_version AND m.event_type = f.event_type
           AND m.event_schema_version = f.schema_version AND m.mandatory
        RETURNING outbox_deliveries.destination
    ), notified AS (
        SELECT pg_catalog.count(pg_catalog.pg_notify('outbox_delivery', n.destination)) AS destinations
          FROM (SELECT DISTINCT d.destination FROM inserted_deliveries d) AS n
    )
    SELECT k.event_id, k.event_envelope_sha256,
           CASE WHEN k.existing_sha256 IS NULL THEN k.members
                ELSE (SELECT pg_catalog.count(*)::integer FROM outbox.outbox_deliveries d WHERE d.event_id = k.event_id) END
      FROM checked k
     CROSS JOIN notified
     ORDER BY k.ord;
END
$fn$;

COMMENT ON FUNCTION outbox.append_events(json, text[], text[]) IS
    'Append many EventEnvelope@1 objects (a JSON array) with the rules of append_event, set-based; rows in input order (SPEC §3.2, §13, R-AK-9, D-2). Raises OB103, OB105, OB201. Caller: outbox_producer.';
REVOKE ALL ON FUNCTION outbox.append_events(json, text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.append_events(json, text[], text[]) TO outbox_producer;
