-- Registry immutability (SPEC R-SEC-3): definitions, their members and applicable events, and
-- destinations never change once registered; a definition's status and activated_at are the
-- only mutable registry metadata, and only through activate_delivery_set's transitions.
{{ template "triggers/delivery_registry__immutable_function.sql" . }}

CREATE TRIGGER tg_delivery_set_versions__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_versions
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_members__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_members
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_applicable_events__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_set_applicable_events
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_destinations__immutable BEFORE UPDATE OR DELETE ON outbox.delivery_destinations
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kinds__immutable BEFORE UPDATE OR DELETE ON outbox.receipt_kinds
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
