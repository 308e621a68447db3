-- examples/orders/append.sql: one order.placed@1 event appended through the kernel's public
-- append function as outbox_producer, the way a producer does it inside its own business
-- transaction (docs/getting-started.md). The kernel canonicalizes the envelope, computes its
-- digest, freezes the active delivery set on it and writes one pending delivery per mandatory
-- member: here order_email and order_ledger. Appending the same event again returns the stored
-- row (the eventId is the idempotency key); a changed envelope under the same eventId is OB105.
SET ROLE outbox_producer;

BEGIN;
-- ... the producer's own business writes would go here, in the same transaction ...
SELECT * FROM outbox.append_event('{
  "eventId": "6f1c3a52-8e0b-4d7a-9c1e-2b5d7f9a0c11",
  "eventType": "order.placed@1",
  "eventSchemaVersion": "1",
  "aggregateId": "order-1001",
  "aggregateRevision": 1,
  "tenant": {"tenantKind": "organization", "tenantId": "acme", "workspaceId": "shop"},
  "operationId": "checkout-1001",
  "causationId": "cart-1001",
  "occurredAt": "2026-12-06T08:00:00.000000Z",
  "payload": {"orderId": "order-1001", "customerEmail": "ada@example.com", "totalCents": 4250, "currency": "EUR"}
}');
COMMIT;

RESET ROLE;
