-- Legal holds (SPEC R-RT-1, R-RT-4): a hold row is written by outbox.set_legal_hold and changes
-- once, when outbox.release_legal_hold sets released_at/released_by; nothing else about it ever
-- changes, it is never deleted or truncated (OB202, every role): the holds are their own audit.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_legal_holds__release_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_LEVEL = 'ROW' AND TG_OP = 'UPDATE' AND OLD.released_at IS NULL AND NEW.released_at IS NOT NULL AND NEW.released_by IS NOT NULL
       AND (NEW.hold_id, NEW.event_id, NEW.reason, NEW.set_by, NEW.set_at)
           IS NOT DISTINCT FROM (OLD.hold_id, OLD.event_id, OLD.reason, OLD.set_by, OLD.set_at) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'immutability violation: % on outbox.legal_holds is not allowed', TG_OP
        USING ERRCODE = 'OB202', DETAIL = 'a legal hold is only ever released once (outbox.release_legal_hold)';
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_legal_holds__release_only() IS
    'Trigger: outbox.legal_holds rows change only once, when released; DELETE/TRUNCATE raise OB202 (SPEC R-RT-1).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_legal_holds__release_only() FROM PUBLIC;
