-- tg_mailbox_sources__watermark_monotonic: W only increases (SPEC R-MX-2), and a
-- source's configuration and start never change after registration (register_source is
-- insert-or-compare). Any other UPDATE, DELETE or TRUNCATE raises OB202, for every role.
CREATE OR REPLACE FUNCTION mailbox.tg_mailbox_sources__watermark_monotonic()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'UPDATE'
       AND (NEW.source, NEW.hole_release_after, NEW.backfill_deadline, NEW.start_after, NEW.head_backoff_base,
            NEW.head_backoff_cap, NEW.max_attempts, NEW.registered_at)
           IS NOT DISTINCT FROM
           (OLD.source, OLD.hole_release_after, OLD.backfill_deadline, OLD.start_after, OLD.head_backoff_base,
            OLD.head_backoff_cap, OLD.max_attempts, OLD.registered_at)
       AND NEW.watermark >= OLD.watermark THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on mailbox.sources is not allowed', TG_OP
        USING ERRCODE = 'OB202',
              DETAIL = 'the watermark only increases and a source''s configuration is fixed at registration (SPEC R-MX-2)';
END
$function$;

REVOKE ALL ON FUNCTION mailbox.tg_mailbox_sources__watermark_monotonic() FROM PUBLIC;
