-- The orders example's own tables (its consumers' domain state), created by the consumer at
-- start (orders.Install); idempotent. They live in the consumer's database next to the inbox
-- schema the kernel's migrations install.
CREATE SCHEMA IF NOT EXISTS orders_example;

-- order_email_sender: the e-mails it queued, one per order.placed event.
CREATE TABLE IF NOT EXISTS orders_example.outgoing_emails (
    message_id text PRIMARY KEY,
    event_id   uuid NOT NULL UNIQUE,
    order_id   text NOT NULL,
    recipient  text NOT NULL,
    subject    text NOT NULL,
    queued_at  timestamptz NOT NULL DEFAULT now()
);

-- order_ledger_writer: one ledger entry per order.placed event.
CREATE TABLE IF NOT EXISTS orders_example.ledger_entries (
    entry_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     uuid NOT NULL UNIQUE,
    order_id     text NOT NULL,
    amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
    currency     text NOT NULL,
    booked_at    timestamptz NOT NULL DEFAULT now()
);
