package pgcall

import "context"

// ObserveRevisionParams are the arguments of inbox.observe_revision.
type ObserveRevisionParams struct {
	ConsumerName      string
	ProjectionName    string
	ProjectionVersion int
	AggregateID       string
	AggregateRevision int64
}

// Outcomes of inbox.observe_revision (SPEC R-CO-3).
const (
	RevisionApply     = "apply"
	RevisionDuplicate = "duplicate"
	RevisionGap       = "gap"
)

const observeRevisionSQL = `SELECT inbox.observe_revision($1::text, $2::text, $3::int, $4::text, $5::bigint)`

// ObserveRevision calls inbox.observe_revision inside the consumer's transaction and returns
// RevisionApply, RevisionDuplicate or RevisionGap. Caller role: outbox_consumer.
func ObserveRevision(ctx context.Context, db DBTX, p ObserveRevisionParams) (string, error) {
	var outcome string
	err := db.QueryRow(ctx, observeRevisionSQL, p.ConsumerName, p.ProjectionName, p.ProjectionVersion,
		p.AggregateID, p.AggregateRevision).Scan(&outcome)
	return outcome, interpretError("observe revision", err)
}
