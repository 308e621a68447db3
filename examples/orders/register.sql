-- examples/orders/register.sql: the orders example's receipt kinds and destinations, registered
-- through the kernel's public SQL functions as outbox_registrar (docs/getting-started.md).
-- Run it with psql against a migrated database:  psql "$PGOUTBOX_URL" -f examples/orders/register.sql
-- Re-running it is a no-op: both functions insert or compare, and refuse (OB101) a kind or a
-- destination registered differently before.
SET ROLE outbox_registrar;

-- order_email: the e-mail sender's receipt. Its kind-specific member is the id of the message
-- it queued; the receipt's time field is sentAt.
SELECT outbox.register_receipt_kind(
    'order_email', 'OrderEmailReceipt', 'orderEmailReceipt', 'sentAt', 1,
    '{"messageId": {"type": "string", "required": true, "maxLength": 200}}');

-- order_ledger: the ledger writer's receipt: the ledger entry it wrote and the amount booked.
SELECT outbox.register_receipt_kind(
    'order_ledger', 'OrderLedgerReceipt', 'orderLedgerReceipt', 'bookedAt', 1,
    '{"ledgerEntryId": {"type": "integer", "required": true, "minimum": 1},
      "amountCents":   {"type": "integer", "required": true, "minimum": 0}}');

-- One destination per consumer: destination, consumer name, receipt kind, receipt type and
-- schema version, projection required.
SELECT outbox.register_destination('order_email', 'order_email_sender', 'order_email', 'OrderEmailReceipt', 1, false);
SELECT outbox.register_destination('order_ledger', 'order_ledger_writer', 'order_ledger', 'OrderLedgerReceipt', 1, false);

RESET ROLE;
