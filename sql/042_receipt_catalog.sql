-- Read functions for the Go kit's catalogs (issue 34 item 3, SPEC §13: "the Go receipt kit reads
-- kinds from the database, never from a list compiled into Go"; R-AK-1a, R-AK-7):
--   outbox.receipt_kind_catalog()  one row per receipt kind with its members as JSON, read by
--                                  receipt.LoadCatalog (consumer kit, dispatcher, tools);
--   outbox.error_code_catalog()    the normalized error codes with their class, read by the
--                                  dispatcher at preflight instead of a Go copy of the table.
-- Functions only (no table changes). Literal SQL, written once.
SET LOCAL ROLE outbox_owner;

-- outbox.receipt_kind_catalog() RETURNS TABLE (...)  (public, SPEC R-AK-1a, §13)
-- Purpose: every registered receipt kind (outbox.receipt_kinds) with its kind-specific members
--   (outbox.receipt_kind_members) as a JSON array sorted by member name (C collation). Each member
--   object is the whole member row minus receipt_kind (to_jsonb), so a column a later migration
--   adds to receipt_kind_members (a bound such as a maximum length) reaches the Go kit without
--   changing this function.
-- Cost: the two registry tables (a handful of rows); called at start and on an explicit reload,
--   never on a hot path.
-- Locking: none (one MVCC snapshot). SQLSTATEs: none of its own.
-- Callers: outbox_consumer (the consumer kit), outbox_dispatcher (broker receipts, receipt digest
--   candidates), outbox_registrar, outbox_auditor. SECURITY DEFINER: none of them reads the
--   registry tables directly.
CREATE FUNCTION outbox.receipt_kind_catalog()
RETURNS TABLE (receipt_kind text, receipt_type text, field_prefix text, time_field text,
               receipt_schema_version integer, requires_projection boolean, members jsonb)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT k.receipt_kind, k.receipt_type, k.field_prefix, k.time_field, k.receipt_schema_version,
           k.requires_projection,
           COALESCE((SELECT pg_catalog.jsonb_agg(pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.-) 'receipt_kind'::text
                                                 ORDER BY m.member COLLATE "C")
                       FROM outbox.receipt_kind_members AS m
                      WHERE m.receipt_kind = k.receipt_kind), '[]'::jsonb)
      FROM outbox.receipt_kinds AS k
     ORDER BY k.receipt_kind COLLATE "C"
$fn$;

COMMENT ON FUNCTION outbox.receipt_kind_catalog() IS
    'Every receipt kind (outbox.receipt_kinds) with its members (rows of outbox.receipt_kind_members minus receipt_kind, as a JSON array sorted by member): what the Go receipt kit loads at start (SPEC R-AK-1a, §13). Callers: outbox_consumer, outbox_dispatcher, outbox_registrar, outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.receipt_kind_catalog() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.receipt_kind_catalog() TO outbox_consumer, outbox_dispatcher, outbox_registrar, outbox_auditor;

-- outbox.error_code_catalog() RETURNS TABLE (code text, retryable boolean, description text)
--   (public, SPEC R-AK-7)
-- Purpose: the closed list of normalized error codes (outbox.error_codes) with their class; the
--   dispatcher reads it at preflight and normalizes every consumer answer against it.
-- Cost: one small registry table. Locking: none. SQLSTATEs: none of its own.
-- Callers: outbox_dispatcher, outbox_consumer, outbox_auditor (SECURITY DEFINER: none of them
--   reads the table directly).
CREATE FUNCTION outbox.error_code_catalog()
RETURNS TABLE (code text, retryable boolean, description text)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT e.code, e.retryable, e.description
      FROM outbox.error_codes AS e
     ORDER BY e.code COLLATE "C"
$fn$;

COMMENT ON FUNCTION outbox.error_code_catalog() IS
    'The normalized error codes (outbox.error_codes) with their class and description: what the dispatcher normalizes consumer answers against (SPEC R-AK-7). Callers: outbox_dispatcher, outbox_consumer, outbox_auditor.';
REVOKE ALL ON FUNCTION outbox.error_code_catalog() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.error_code_catalog() TO outbox_dispatcher, outbox_consumer, outbox_auditor;

RESET ROLE;
