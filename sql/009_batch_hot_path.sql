-- Batch hot path (SPEC D-2, §2, R-AK-1a, R-AK-5, R-AK-9, §12a): canonical envelope stored once,
-- publications in a narrow table, set-based outcome functions.
SET LOCAL ROLE outbox_owner;

-- D-2 / P-5: the canonical envelope bytes the database verified at append are stored once, so a
-- claim returns them and a dispatcher checks sha256(bytes) instead of re-canonicalizing. NULL only for
-- rows written outside append_event (tests that simulate tampering): readers then canonicalize.
ALTER TABLE outbox.outbox_events ADD COLUMN event_envelope_canonical text;
ALTER TABLE outbox.outbox_events DISABLE TRIGGER tg_outbox_events__immutable;
UPDATE outbox.outbox_events AS e
   SET event_envelope_canonical = outbox.jcs_canonicalize(outbox._event_envelope(e)::json);
ALTER TABLE outbox.outbox_events ENABLE TRIGGER tg_outbox_events__immutable;

{{ template "functions/_jcs_text_problem.sql" . }}

-- append_event stores the canonical text it verified (hot path) or computed (slow path).
DROP FUNCTION outbox.append_event(json, text, text);
{{ template "functions/append_event.sql" . }}

RESET ROLE;
