package pgcall

import "context"

// ObserveRevisionParams are the arguments of inbox.observe_revision.
type ObserveRevisionParams struct {
	ConsumerName      string
	ProjectionName    string
	ProjectionVersion int
	AggregateID       string
	AggregateRevision int64
	// BuildToken: the live build token of a shadow projection version (SPEC R-PV-1); "" otherwise.
	BuildToken string
}

// Outcomes of inbox.observe_revision (SPEC R-CO-3).
const (
	RevisionApply     = "apply"
	RevisionDuplicate = "duplicate"
	RevisionGap       = "gap"
)

const observeRevisionSQL = `SELECT inbox.observe_revision($1::text, $2::text, $3::int, $4::text, $5::bigint, $6::uuid)`

// ObserveRevision calls inbox.observe_revision inside the consumer's transaction and returns
// RevisionApply, RevisionDuplicate or RevisionGap. ErrProjectionNotRegistered (OB802) an
// unregistered projection version; ErrFencingRejected (OB001) a shadow version without its live
// build token. Caller role: outbox_consumer.
func ObserveRevision(ctx context.Context, db DBTX, p ObserveRevisionParams) (string, error) {
	var outcome string
	err := db.QueryRow(ctx, observeRevisionSQL, p.ConsumerName, p.ProjectionName, p.ProjectionVersion,
		p.AggregateID, p.AggregateRevision, optionalUUID(p.BuildToken)).Scan(&outcome)
	return outcome, interpretError("observe revision", err)
}
