-- Destination and delivery-set registry (SPEC §3.1, R-DS-1..6, §3.4 reference destinations).
SET LOCAL ROLE outbox_owner;

-- Receipt kinds (SPEC R-AK-1, R-AK-1a): the closed union of ActiveConsumerAck@1.appliedReceipt.
INSERT INTO outbox.receipt_kinds (receipt_kind, receipt_type, field_prefix, time_field, receipt_schema_version) VALUES
    ('operations_projection', 'OperationsProjectionAppliedReceipt', 'operationsProjectionAppliedReceipt', 'appliedAt', 1),
    ('metering_input_processor', 'MeteringInputProcessorConsumerReceipt', 'meteringInputProcessorConsumerReceipt', 'committedAt', 1),
    ('billing_finalization_coordinator', 'BillingFinalizationCoordinatorConsumerReceipt', 'billingFinalizationCoordinatorConsumerReceipt', 'committedAt', 1),
    ('billing_settlement_catch_up', 'BillingSettlementCatchUpConsumerReceipt', 'billingSettlementCatchUpConsumerReceipt', 'committedAt', 1),
    ('broker_publication', 'BrokerPublicationReceipt', 'brokerPublicationReceipt', 'publishedAt', 1);

-- Per-pair envelope refinements (SPEC R-AP-7): fields an envelope of that pair must carry.
CREATE TABLE outbox.envelope_refinements (
    event_type           text NOT NULL,
    event_schema_version text NOT NULL,
    required_field       text NOT NULL CHECK (required_field IN ('correlationId', 'causationId', 'operationId', 'projectId')),
    PRIMARY KEY (event_type, event_schema_version, required_field)
);
INSERT INTO outbox.envelope_refinements VALUES
    ('run.created@2.0', '2.0', 'correlationId'),
    ('run.created@2.0', '2.0', 'operationId'),
    ('wallet.reserved@2.0', '2.0', 'correlationId'),
    ('wallet.reserved@2.0', '2.0', 'operationId'),
    ('wallet.reserved@2.0', '2.0', 'causationId');

{{ template "functions/_registry_fail.sql" . }}
{{ template "functions/_json_int.sql" . }}
{{ template "functions/register_destination.sql" . }}
{{ template "functions/register_delivery_set.sql" . }}
{{ template "functions/activate_delivery_set.sql" . }}

-- The four reference destinations (SPEC §3.4) with their default retry policies.
SELECT outbox.register_destination('core_operations', 'operations_projector', 'operations_projection',
                                   'OperationsProjectionAppliedReceipt', 1, true, 'none');
SELECT outbox.register_destination('metering_input_processor', 'metering_input_processor_consumer',
                                   'metering_input_processor', 'MeteringInputProcessorConsumerReceipt', 1, false, 'none');
SELECT outbox.register_destination('billing_finalization_coordinator', 'billing_finalization_coordinator_consumer',
                                   'billing_finalization_coordinator', 'BillingFinalizationCoordinatorConsumerReceipt', 1, false, 'none');
SELECT outbox.register_destination('billing_settlement_catch_up', 'billing_settlement_catch_up_consumer',
                                   'billing_settlement_catch_up', 'BillingSettlementCatchUpConsumerReceipt', 1, false, 'none');

{{ template "triggers/delivery_registry__immutable.sql" . }}

-- Grants (SPEC R-SEC-1): the registrar acts through the functions and may read the registry;
-- the auditor reads it. Nobody but the owner writes these tables.
GRANT USAGE ON SCHEMA outbox TO outbox_registrar, outbox_producer, outbox_dispatcher, outbox_consumer, outbox_auditor;
GRANT SELECT ON outbox.receipt_kinds, outbox.delivery_destinations, outbox.delivery_set_versions,
                outbox.delivery_set_applicable_events, outbox.delivery_set_members, outbox.envelope_refinements
    TO outbox_registrar, outbox_auditor;

RESET ROLE;
