package pgcall

import "context"

// ReceiptProblem is one row of inbox.verify_receipt_digests.
type ReceiptProblem struct {
	ConsumerName string
	EventID      string
	Problem      string
}

const verifyReceiptDigestsSQL = `SELECT consumer_name, event_id::text, problem FROM inbox.verify_receipt_digests($1::int)`

// VerifyReceiptDigests calls inbox.verify_receipt_digests: the audit sweep that re-canonicalizes
// the newest maxRows stored receipts and reports every receipt whose text is not canonical,
// whose digest is not reproduced or whose members differ from their columns (SPEC D-2). An
// empty result means every receipt checked is sound. Caller role: outbox_auditor.
func VerifyReceiptDigests(ctx context.Context, db DBTX, maxRows int) ([]ReceiptProblem, error) {
	rows, err := db.Query(ctx, verifyReceiptDigestsSQL, maxRows)
	if err != nil {
		return nil, interpretError("verify receipt digests", err)
	}
	defer rows.Close()
	var out []ReceiptProblem
	for rows.Next() {
		var p ReceiptProblem
		if err := rows.Scan(&p.ConsumerName, &p.EventID, &p.Problem); err != nil {
			return nil, interpretError("verify receipt digests", err)
		}
		out = append(out, p)
	}
	return out, interpretError("verify receipt digests", rows.Err())
}
