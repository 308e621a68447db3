package pgcall

import (
	"context"
	"encoding/json"
)

const consoleEventPayloadSQL = `SELECT outbox.console_event_payload($1::uuid)::text`

// ConsoleEventPayload calls outbox.console_event_payload: the event's payload (nil when the
// event is unknown or archived). Only for an explicit "show payload" request. Caller role:
// outbox_auditor only.
func ConsoleEventPayload(ctx context.Context, db DBTX, eventID string) (json.RawMessage, error) {
	var s *string
	if err := db.QueryRow(ctx, consoleEventPayloadSQL, eventID).Scan(&s); err != nil {
		return nil, interpretError("console event payload", err)
	}
	if s == nil {
		return nil, nil
	}
	return json.RawMessage(*s), nil
}
