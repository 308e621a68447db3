package pgcall

import "context"

// SearchHit is one row of outbox.search_exact_id (R-OP-3).
type SearchHit struct {
	Result      string  // matched | not_found | inconclusive
	Reason      *string // inconclusive only
	EventID     *string // matched only
	OperationID *string // matched and linked only
}

const searchExactIDSQL = `SELECT result, reason, event_id::text, operation_id FROM outbox.search_exact_id($1::text, $2::text)`

// SearchExactID calls outbox.search_exact_id(kind, id); 22023 for an unknown kind or a malformed
// id. Caller role: outbox_auditor.
func SearchExactID(ctx context.Context, db DBTX, kind, id string) ([]SearchHit, error) {
	rows, err := db.Query(ctx, searchExactIDSQL, kind, id)
	if err != nil {
		return nil, interpretError("search exact id", err)
	}
	defer rows.Close()
	var out []SearchHit
	for rows.Next() {
		var h SearchHit
		if err := rows.Scan(&h.Result, &h.Reason, &h.EventID, &h.OperationID); err != nil {
			return nil, interpretError("search exact id", err)
		}
		out = append(out, h)
	}
	return out, interpretError("search exact id", rows.Err())
}
