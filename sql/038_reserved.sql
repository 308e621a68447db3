-- Placeholder: number 038 is reserved for another branch's migration (tern needs contiguous
-- numbers, and 039_receipt_rule.sql follows it). It does nothing. When the branch that owns 038
-- is merged, its file replaces this one (delete this file in that merge).
SELECT 1;
