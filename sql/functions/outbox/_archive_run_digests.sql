-- outbox._archive_run_digests(p_run_id uuid)
--   RETURNS TABLE (events int, deliveries int, attempt_starts int, attempt_finishes int,
--                  quarantine_rows int, archived_set_sha256 text, content_sha256 text)
-- Purpose: what an archive run left in the archive, recomputed from the archive tables alone
--   (SPEC R-RT-3): the row counts per table, the set digest of the archived (event_id, digest)
--   pairs and a digest over the complete content of every archived row of the run.
--   archived_set_sha256 = lower-case hex sha256 of the UTF-8 text made of one line
--     "<event_id> <event_envelope_sha256>\n" per archived event, in event_id order (the empty
--     text for an empty set).
--   content_sha256 = sha256 over five sections (events, deliveries, attempt starts, attempt
--     finishes, quarantine rows), each the label and the rows' jsonb text one per line in key
--     order (quarantine rows: in order of their text).
--   outbox.archive_events writes both into the run row; outbox.verify_archive_run recomputes
--   and compares them, so a missing, added or altered archive row fails verification.
-- Caller: archive_events, verify_archive_run (as outbox_owner); granted to nobody.
CREATE OR REPLACE FUNCTION outbox._archive_run_digests(p_run_id uuid)
 RETURNS TABLE(events integer, deliveries integer, attempt_starts integer, attempt_finishes integer, quarantine_rows integer, archived_set_sha256 text, content_sha256 text)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT (SELECT pg_catalog.count(*) FROM outbox.archived_events a WHERE a.run_id = p_run_id)::integer,
           (SELECT pg_catalog.count(*) FROM outbox.archived_deliveries a WHERE a.run_id = p_run_id)::integer,
           (SELECT pg_catalog.count(*) FROM outbox.archived_attempt_starts a WHERE a.run_id = p_run_id)::integer,
           (SELECT pg_catalog.count(*) FROM outbox.archived_attempt_finishes a WHERE a.run_id = p_run_id)::integer,
           (SELECT pg_catalog.count(*) FROM outbox.archived_quarantine a WHERE a.run_id = p_run_id)::integer,
           outbox._sha256_hex(coalesce(
               (SELECT pg_catalog.string_agg(a.event_id::text || ' ' || a.event_envelope_sha256 || E'\n', '' ORDER BY a.event_id)
                  FROM outbox.archived_events a WHERE a.run_id = p_run_id), '')),
           outbox._sha256_hex(
               'events' || E'\n' || coalesce(
                   (SELECT pg_catalog.string_agg(pg_catalog.to_jsonb(a)::text, E'\n' ORDER BY a.event_id)
                      FROM outbox.archived_events a WHERE a.run_id = p_run_id), '')
               || E'\ndeliveries\n' || coalesce(
                   (SELECT pg_catalog.string_agg(pg_catalog.to_jsonb(a)::text, E'\n' ORDER BY a.destination, a.event_id)
                      FROM outbox.archived_deliveries a WHERE a.run_id = p_run_id), '')
               || E'\nattempt_starts\n' || coalesce(
                   (SELECT pg_catalog.string_agg(pg_catalog.to_jsonb(a)::text, E'\n' ORDER BY a.attempt_id)
                      FROM outbox.archived_attempt_starts a WHERE a.run_id = p_run_id), '')
               || E'\nattempt_finishes\n' || coalesce(
                   (SELECT pg_catalog.string_agg(pg_catalog.to_jsonb(a)::text, E'\n' ORDER BY a.attempt_id)
                      FROM outbox.archived_attempt_finishes a WHERE a.run_id = p_run_id), '')
               || E'\nquarantine\n' || coalesce(
                   (SELECT pg_catalog.string_agg(x.t, E'\n' ORDER BY x.t)
                      FROM (SELECT (pg_catalog.to_jsonb(a) - 'archive_row_id')::text AS t
                              FROM outbox.archived_quarantine a WHERE a.run_id = p_run_id) x), ''))
$function$;

COMMENT ON FUNCTION outbox._archive_run_digests(uuid) IS
    'Private: row counts, (event_id, digest) set digest and content digest of one archive run, from the archive tables (SPEC R-RT-3).';

REVOKE ALL ON FUNCTION outbox._archive_run_digests(uuid) FROM PUBLIC;
