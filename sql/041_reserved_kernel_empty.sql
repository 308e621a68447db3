-- PLACEHOLDER on branch receipt-catalog only: migration 041 belongs to branch kernel-empty
-- (outbox.register_receipt_kind). tern needs contiguous numbers, so this empty file lets 042 apply
-- here. The coordinator deletes it when merging (kernel-empty's 041 takes its place).
SELECT 1;
