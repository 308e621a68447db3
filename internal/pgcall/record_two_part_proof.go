package pgcall

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
)

const recordTwoPartProofSQL = `SELECT outbox.record_two_part_proof($1::json)`

// RecordTwoPartProof calls outbox.record_two_part_proof: keeps a CompletenessProofTwoPart
// document immutably beside the producer manifest it binds and returns its jcs-sha256-v1
// (SPEC R-OP-2). Caller role: outbox_auditor.
func RecordTwoPartProof(ctx context.Context, db DBTX, doc json.RawMessage) (string, error) {
	var sha string
	err := db.QueryRow(ctx, recordTwoPartProofSQL, string(doc)).Scan(&sha)
	return sha, interpretError("record two-part proof", err)
}

// StoredTwoPartProof is one row of outbox.completeness_two_part_proofs.
type StoredTwoPartProof struct {
	SHA256   string
	Status   string
	Document json.RawMessage
}

// ReadTwoPartProof reads a stored two-part proof by its sha256; found is false when no such
// proof was recorded. Caller role: outbox_auditor.
func ReadTwoPartProof(ctx context.Context, db DBTX, sha string) (StoredTwoPartProof, bool, error) {
	var p StoredTwoPartProof
	var doc string
	err := db.QueryRow(ctx, `SELECT proof_sha256, status, document FROM outbox.completeness_two_part_proofs WHERE proof_sha256 = $1`, sha).
		Scan(&p.SHA256, &p.Status, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	p.Document = json.RawMessage(doc)
	return p, err == nil, interpretError("read two-part proof", err)
}
