-- tg_mailbox_messages__terminal_immutable: a processing row's identity and message never change;
-- terminal states (succeeded, dead) never revert or change (SPEC R-MX-6, R-MX-7); the
-- backfill fact only moves owed -> done | abandoned, abandoned -> resolved (R-MX-8, INV-8).
-- DELETE (archiving a processing row) is allowed only for a terminal row whose mark is done or
-- resolved by an operator: an abandoned or owed backfill never counts as marked for purge
-- decisions (R-MX-8). Anything else raises OB202, for every role.
CREATE OR REPLACE FUNCTION mailbox.tg_mailbox_messages__terminal_immutable()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.state IN ('succeeded', 'dead') AND OLD.backfill_state IN ('done', 'resolved') THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'immutability violation: processing row %/% cannot be removed', OLD.source, OLD.msg_id
            USING ERRCODE = 'OB202',
                  DETAIL = pg_catalog.format('state %s, backfill %s: only terminal rows whose mark is done or resolved may be archived',
                                             OLD.state, coalesce(OLD.backfill_state, 'none'));
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'immutability violation: TRUNCATE on mailbox.messages is not allowed' USING ERRCODE = 'OB202';
    END IF;
    IF (NEW.source, NEW.msg_id, NEW.message, NEW.received_at, NEW.enqueued_at)
       IS DISTINCT FROM (OLD.source, OLD.msg_id, OLD.message, OLD.received_at, OLD.enqueued_at) THEN
        RAISE EXCEPTION 'immutability violation: a processing row''s message never changes'
            USING ERRCODE = 'OB202', DETAIL = pg_catalog.format('processing row %s/%s', OLD.source, OLD.msg_id);
    END IF;
    IF OLD.state IN ('succeeded', 'dead', 'late') THEN
        IF (NEW.state, NEW.attempt, NEW.dead_reason, NEW.finished_at, NEW.lease_token)
           IS DISTINCT FROM (OLD.state, OLD.attempt, OLD.dead_reason, OLD.finished_at, OLD.lease_token) THEN
            RAISE EXCEPTION 'immutability violation: terminal state % of %/% never reverts', OLD.state, OLD.source, OLD.msg_id
                USING ERRCODE = 'OB202', DETAIL = 'SUCCEEDED, DEAD and late rows are final (SPEC R-MX-6)';
        END IF;
    END IF;
    IF NEW.backfill_state IS DISTINCT FROM OLD.backfill_state
       AND NOT ((OLD.backfill_state IS NULL AND NEW.backfill_state = 'owed' AND NEW.state IN ('succeeded', 'dead'))
                OR (OLD.backfill_state = 'owed' AND NEW.backfill_state IN ('done', 'abandoned'))
                OR (OLD.backfill_state = 'abandoned' AND NEW.backfill_state = 'resolved')) THEN
        RAISE EXCEPTION 'immutability violation: backfill % -> % of %/% is not allowed',
                        coalesce(OLD.backfill_state, 'none'), coalesce(NEW.backfill_state, 'none'), OLD.source, OLD.msg_id
            USING ERRCODE = 'OB202', DETAIL = 'the backfill fact moves owed -> done | abandoned, abandoned -> resolved (SPEC R-MX-8)';
    END IF;
    RETURN NEW;
END
$function$;

REVOKE ALL ON FUNCTION mailbox.tg_mailbox_messages__terminal_immutable() FROM PUBLIC;
