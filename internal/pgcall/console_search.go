package pgcall

import (
	"context"
	"time"
)

// ConsoleSearchKinds are the kinds outbox.console_search accepts, in the order the console
// offers them.
var ConsoleSearchKinds = []string{"eventId", "aggregateId", "correlationId", "operationId", "eventType", "destination", "errorCode", "timeRange"}

// ConsoleSearchParams are the arguments of outbox.console_search.
type ConsoleSearchParams struct {
	Kind     string
	Value    string     // empty for timeRange (sent as NULL)
	From, To *time.Time // optional [From, To); both required for timeRange
	// Before is the keyset cursor: the (At, CursorID) of the last row of the previous page;
	// the zero value asks for the first page.
	BeforeAt time.Time
	BeforeID string
	Limit    int // 1..500
}

// ConsoleSearchHit is one row of outbox.console_search. Destination, Status and ErrorCode are
// set for the destination and errorCode kinds.
type ConsoleSearchHit struct {
	EventID       string
	EventType     string
	AggregateID   string
	CorrelationID *string
	OperationID   *string
	CreatedAt     time.Time
	Destination   *string
	Status        *string
	ErrorCode     *string
	At            time.Time // created_at; the attempt's finish for errorCode
	CursorID      string    // the event id; the attempt id for errorCode
}

const consoleSearchSQL = `SELECT event_id::text, event_type, aggregate_id, correlation_id, operation_id, created_at,
       destination, status, error_code, at, cursor_id::text
FROM outbox.console_search($1::text, $2::text, $3::timestamptz, $4::timestamptz, $5::timestamptz, $6::uuid, $7::int)`

// ConsoleSearch calls outbox.console_search: exact search by kind, newest first, keyset paged.
// 22023 for an unknown kind, a bad value, an empty range, half a cursor or a limit outside
// 1..500. Caller role: outbox_auditor.
func ConsoleSearch(ctx context.Context, db DBTX, p ConsoleSearchParams) ([]ConsoleSearchHit, error) {
	var value *string
	if p.Kind != "timeRange" || p.Value != "" {
		value = &p.Value
	}
	var beforeAt *time.Time
	var beforeID *string
	if p.BeforeID != "" {
		beforeAt, beforeID = &p.BeforeAt, &p.BeforeID
	}
	rows, err := db.Query(ctx, consoleSearchSQL, p.Kind, value, p.From, p.To, beforeAt, beforeID, p.Limit)
	if err != nil {
		return nil, interpretError("console search", err)
	}
	defer rows.Close()
	var out []ConsoleSearchHit
	for rows.Next() {
		var h ConsoleSearchHit
		if err := rows.Scan(&h.EventID, &h.EventType, &h.AggregateID, &h.CorrelationID, &h.OperationID, &h.CreatedAt,
			&h.Destination, &h.Status, &h.ErrorCode, &h.At, &h.CursorID); err != nil {
			return nil, interpretError("console search", err)
		}
		out = append(out, h)
	}
	return out, interpretError("console search", rows.Err())
}
