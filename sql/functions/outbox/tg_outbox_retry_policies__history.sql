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
CREATE OR REPLACE FUNCTION outbox.tg_outbox_retry_policies__history()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_row outbox.outbox_retry_policies;
BEGIN
    IF TG_OP = 'DELETE' THEN
        v_row := OLD;
    ELSE
        v_row := NEW;
    END IF;
    INSERT INTO outbox.outbox_retry_policy_history
           (destination, policy_version, operation, base_delay, multiplier, max_delay, jitter,
            max_attempts, changed_by, changed_at)
    VALUES (v_row.destination, v_row.policy_version, TG_OP, v_row.base_delay, v_row.multiplier,
            v_row.max_delay, v_row.jitter, v_row.max_attempts, session_user, pg_catalog.now());
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION outbox.tg_outbox_retry_policies__history() IS
    'Trigger: append every INSERT/UPDATE/DELETE of a retry policy to outbox_retry_policy_history with changed_by = session_user (SPEC D-5).';

REVOKE ALL ON FUNCTION outbox.tg_outbox_retry_policies__history() FROM PUBLIC;
