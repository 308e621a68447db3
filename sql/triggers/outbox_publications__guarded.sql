-- Publications (SPEC §2 publication table, R-AK-4, T-5): one row per published event, inserted
-- once by the publication function (outbox._publish_events) and never changed. Nobody, the
-- owner included, may insert a publication outside that function or for an event with a
-- mandatory delivery that is not acknowledged, nor update, delete or truncate one: OB202.
-- INSERT: a statement-level check over the new rows (one query per publishing statement):
--   the statement must be the publishing statement of outbox._publish_events, read from the call
--   stack (no session setting is trusted) AND every new row's event must have all mandatory
--   deliveries acknowledged. The check is an index lookup per
--   new row (outbox_deliveries_by_event, a LATERAL aggregate that cannot become a hash join over
--   the deliveries), planned for every statement (force_custom_plan: the transition table's
--   size is known then), never a scan of outbox_deliveries (HP-4).
{{ template "triggers/outbox_publications__guarded_function.sql" . }}

CREATE TRIGGER tg_outbox_publications__guarded_insert AFTER INSERT ON outbox.outbox_publications
    REFERENCING NEW TABLE AS new_publications
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE TRIGGER tg_outbox_publications__guarded BEFORE UPDATE OR DELETE ON outbox.outbox_publications
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
CREATE TRIGGER tg_outbox_publications__no_truncate BEFORE TRUNCATE ON outbox.outbox_publications
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_outbox_publications__guarded();
