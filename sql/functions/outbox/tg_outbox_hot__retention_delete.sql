-- Hot-table deletion guard (SPEC R-RT-1, R-RT-4, R-SEC-3): rows of the hot tables
-- (outbox_events, outbox_deliveries, outbox_delivery_attempt_starts,
-- outbox_delivery_attempt_finishes, outbox_quarantine, outbox_publications) leave only through
-- outbox.archive_events, in the transaction that copied them into the archive. Any other DELETE,
-- by any role (the owner included), raises OB202; TRUNCATE stays refused by each table's own
-- truncate trigger.
-- How: two statement-level triggers per table (one query per DELETE statement, not one call per
--   row): BEFORE DELETE refuses outside an archive run, AFTER DELETE checks the deleted rows
--   (transition table old_rows). A deletion is allowed
--   only when the transaction-local setting pgoutbox.archive_run names a run that has no
--   outbox.archive_runs row yet (the run row is written last, so a finished run can never
--   authorize a deletion again) AND every deleted row has its copy under that run: its event in
--   outbox.archived_events (attempt finishes: the attempt in outbox.archived_attempt_finishes).
--   A forged setting alone deletes nothing: only the owner can write the archive tables.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_hot__retention_delete()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_run     text := coalesce(pg_catalog.current_setting('pgoutbox.archive_run', true), '');
    v_key     text := CASE TG_TABLE_NAME WHEN 'outbox_delivery_attempt_finishes' THEN 'attempt_id' ELSE 'event_id' END;
    v_archive text := CASE TG_TABLE_NAME WHEN 'outbox_delivery_attempt_finishes' THEN 'archived_attempt_finishes' ELSE 'archived_events' END;
    v_bad     text;
BEGIN
    IF v_run !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
       OR EXISTS (SELECT 1 FROM outbox.archive_runs r WHERE r.run_id = v_run::uuid) THEN
        -- BEFORE: refused before any row (or foreign key) is looked at
        RAISE EXCEPTION 'immutability violation: DELETE on outbox.% is not allowed', TG_TABLE_NAME
            USING ERRCODE = 'OB202',
                  DETAIL = 'rows leave the hot tables only through outbox.archive_events, which copies them into the archive first';
    END IF;
    IF TG_WHEN = 'AFTER' THEN
        EXECUTE pg_catalog.format(
            'SELECT o.%1$I::text FROM old_rows o WHERE NOT EXISTS (SELECT 1 FROM outbox.%2$I a WHERE a.%1$I = o.%1$I AND a.run_id = $1) LIMIT 1',
            v_key, v_archive) INTO v_bad USING v_run::uuid;
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'immutability violation: DELETE on outbox.% is not allowed', TG_TABLE_NAME
                USING ERRCODE = 'OB202',
                      DETAIL = pg_catalog.format('%s %s was not copied into the archive by this run', v_key, v_bad);
        END IF;
    END IF;
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_hot__retention_delete() IS
    'Trigger: a DELETE on a hot table raises OB202 unless outbox.archive_events copied every deleted row into the archive in the same transaction (SPEC R-RT-1, R-RT-4).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_hot__retention_delete() FROM PUBLIC;
