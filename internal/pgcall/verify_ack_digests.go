package pgcall

import "context"

// AckDigestProblem is one row of outbox.verify_ack_digests.
type AckDigestProblem struct {
	Destination, EventID, Problem string
}

const verifyAckDigestsSQL = `SELECT destination, event_id::text, problem FROM outbox.verify_ack_digests($1::int)`

// VerifyAckDigests calls outbox.verify_ack_digests: the audit sweep that re-canonicalizes the
// receipts of acknowledged deliveries (D-2). Caller role: outbox_auditor.
func VerifyAckDigests(ctx context.Context, db DBTX, maxRows int) ([]AckDigestProblem, error) {
	rows, err := db.Query(ctx, verifyAckDigestsSQL, maxRows)
	if err != nil {
		return nil, interpretError("verify ack digests", err)
	}
	defer rows.Close()
	var out []AckDigestProblem
	for rows.Next() {
		var p AckDigestProblem
		if err := rows.Scan(&p.Destination, &p.EventID, &p.Problem); err != nil {
			return nil, interpretError("verify ack digests", err)
		}
		out = append(out, p)
	}
	return out, interpretError("verify ack digests", rows.Err())
}
