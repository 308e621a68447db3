-- tg_outbox_retry_policies__history: retry policies are versioned configuration (SPEC §2, D-5).
--   BEFORE UPDATE (tg_outbox_retry_policies__version): the destination cannot change (OB202);
--     a real change bumps policy_version by one and sets updated_at = now(); an UPDATE that
--     changes no policy value keeps the version.
--   AFTER INSERT/UPDATE/DELETE (tg_outbox_retry_policies__history): appends the new values (the
--     old ones for DELETE) with the policy_version, the operation, changed_by = session_user (the
--     login behind any SET ROLE / SECURITY DEFINER) and changed_at = now() to
--     outbox.outbox_retry_policy_history (itself append-only).
--   TRUNCATE raises OB202 (it would bypass the history).
-- The history function is SECURITY DEFINER (owner) so that whoever may change a policy also
-- records it, without INSERT on the history table.
CREATE OR REPLACE FUNCTION outbox.tg_outbox_retry_policies__version()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'outbox.outbox_retry_policies cannot be truncated'
            USING ERRCODE = 'OB202', DETAIL = 'delete policies row by row so that the history records them';
    END IF;
    IF NEW.destination IS DISTINCT FROM OLD.destination THEN
        RAISE EXCEPTION 'outbox.outbox_retry_policies: destination is immutable'
            USING ERRCODE = 'OB202',
                  DETAIL = pg_catalog.format('policy of %s cannot be moved to %s', OLD.destination, NEW.destination);
    END IF;
    IF (NEW.base_delay, NEW.multiplier, NEW.max_delay, NEW.jitter, NEW.max_attempts)
       IS DISTINCT FROM (OLD.base_delay, OLD.multiplier, OLD.max_delay, OLD.jitter, OLD.max_attempts) THEN
        NEW.policy_version := OLD.policy_version + 1;
        NEW.updated_at := pg_catalog.now();
    ELSE
        NEW.policy_version := OLD.policy_version;
        NEW.updated_at := OLD.updated_at;
    END IF;
    RETURN NEW;
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_retry_policies__version() IS
    'Trigger: bump policy_version on every change of a retry policy; destination immutable; no TRUNCATE (SPEC D-5).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_retry_policies__version() FROM PUBLIC;
