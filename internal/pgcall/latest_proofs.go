package pgcall

import (
	"context"
	"time"
)

// ProofSummary is the latest completeness proof of one scope (outbox.completeness_manifests)
// re-checked now by outbox.check_completeness (R-OP-2).
type ProofSummary struct {
	ManifestID      string
	ManifestSHA256  string
	SourceFilter    string // canonical scope, {} = every event
	Status          string
	MemberCount     int64
	ReceiptAntiJoin *int64 // the proof's receipt anti-join guard (nil when not evaluated)
	TakenAt         time.Time
	Age             time.Duration
	Freshness       string
	Reason          *string
}

// latestProofsSQL: the newest manifest per scope (at most $1 scopes, newest first), each
// re-checked against the current state (the re-check rebuilds the member set: O(events)).
const latestProofsSQL = `SELECT m.manifest_id::text, m.manifest_sha256, m.source_filter, m.status, m.member_count,
       (split_part(split_part(m.document, ',"kindSets":', 1), '"guards":', 2)::jsonb #>> '{receiptAntiJoin,count}')::bigint,
       m.taken_at, extract(epoch FROM clock_timestamp() - m.taken_at)::float8, c.freshness, c.reason
FROM (SELECT * FROM (SELECT DISTINCT ON (source_filter) * FROM outbox.completeness_manifests
                      ORDER BY source_filter, taken_at DESC, manifest_id DESC) AS l
       ORDER BY l.taken_at DESC LIMIT $1::int) AS m
CROSS JOIN LATERAL outbox.check_completeness(m.manifest_id) AS c
ORDER BY m.taken_at DESC`

// LatestProofs returns the latest proof of each scope (at most limit scopes) with its
// freshness now. Caller role: outbox_auditor.
func LatestProofs(ctx context.Context, db DBTX, limit int) ([]ProofSummary, error) {
	rows, err := db.Query(ctx, latestProofsSQL, limit)
	if err != nil {
		return nil, interpretError("latest proofs", err)
	}
	defer rows.Close()
	var out []ProofSummary
	for rows.Next() {
		var p ProofSummary
		var age float64
		if err := rows.Scan(&p.ManifestID, &p.ManifestSHA256, &p.SourceFilter, &p.Status, &p.MemberCount, &p.ReceiptAntiJoin,
			&p.TakenAt, &age, &p.Freshness, &p.Reason); err != nil {
			return nil, interpretError("latest proofs", err)
		}
		p.Age = time.Duration(age * float64(time.Second))
		out = append(out, p)
	}
	return out, interpretError("latest proofs", rows.Err())
}
