-- examples/orders/check.sql: where the example's event stands, read as outbox_auditor: one row
-- per delivery with its status and the receipt kind it was acknowledged with, and the event's
-- publication time (set once every mandatory delivery is acknowledged).
SET ROLE outbox_auditor;

SELECT d.destination, d.status, d.ack_receipt_kind, p.published_at IS NOT NULL AS published
  FROM outbox.outbox_deliveries AS d
  LEFT JOIN outbox.outbox_publications AS p ON p.event_id = d.event_id
 WHERE d.event_id = '6f1c3a52-8e0b-4d7a-9c1e-2b5d7f9a0c11'
 ORDER BY d.destination;

RESET ROLE;
