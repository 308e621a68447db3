-- Registry and kernel reference tables (SPEC R-SEC-3, R-SEC-5): TRUNCATE bypasses the row
-- triggers that refuse DELETE, so every such table refuses it too (OB202), the owner included.
-- receipt_kind_members, envelope_refinements and error_codes are immutable like the rest of the
-- registry; kernel_settings rows may be tuned (UPDATE) by the owner but never removed (a missing
-- max_payload_bytes would lift the size bound).
CREATE TRIGGER tg_delivery_set_versions__no_truncate BEFORE TRUNCATE ON outbox.delivery_set_versions
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_members__no_truncate BEFORE TRUNCATE ON outbox.delivery_set_members
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_set_applicable_events__no_truncate BEFORE TRUNCATE ON outbox.delivery_set_applicable_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_delivery_destinations__no_truncate BEFORE TRUNCATE ON outbox.delivery_destinations
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kinds__no_truncate BEFORE TRUNCATE ON outbox.receipt_kinds
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kind_members__immutable BEFORE UPDATE OR DELETE ON outbox.receipt_kind_members
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_receipt_kind_members__no_truncate BEFORE TRUNCATE ON outbox.receipt_kind_members
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_envelope_refinements__immutable BEFORE UPDATE OR DELETE ON outbox.envelope_refinements
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_envelope_refinements__no_truncate BEFORE TRUNCATE ON outbox.envelope_refinements
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_error_codes__immutable BEFORE UPDATE OR DELETE ON outbox.error_codes
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_error_codes__no_truncate BEFORE TRUNCATE ON outbox.error_codes
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_kernel_settings__no_delete BEFORE DELETE ON outbox.kernel_settings
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_kernel_settings__no_truncate BEFORE TRUNCATE ON outbox.kernel_settings
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_consumer_roles__immutable BEFORE UPDATE OR DELETE ON inbox.consumer_roles
    FOR EACH ROW EXECUTE FUNCTION outbox.tg_registry__immutable();
CREATE TRIGGER tg_consumer_roles__no_truncate BEFORE TRUNCATE ON inbox.consumer_roles
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.tg_registry__immutable();
