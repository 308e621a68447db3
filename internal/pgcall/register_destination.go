package pgcall

import "context"

// DestinationParams are the arguments of outbox.register_destination (SPEC §2, §3.4, R-CL-7).
type DestinationParams struct {
	Destination          string
	ConsumerName         string
	ReceiptKind          string // a registered receipt kind (outbox.receipt_kinds)
	ReceiptType          string // the kind's receipt type
	ReceiptSchemaVersion int    // the kind's receipt schema version
	ProjectionRequired   bool
	Ordering             string // "none" or "per_aggregate"; "" is the SQL default (none)
}

// Orderings of outbox.register_destination.
const (
	OrderingNone         = "none"
	OrderingPerAggregate = "per_aggregate"
)

const registerDestinationSQL = `SELECT outbox.register_destination($1::text, $2::text, $3::text, $4::text, $5::integer, $6::boolean,
	coalesce($7::text, 'none'))`

// RegisterDestination calls outbox.register_destination: insert-or-compare of one destination
// of the registry (the identical destination again is a no-op; any difference is OB101).
// Caller role: outbox_registrar.
func RegisterDestination(ctx context.Context, db DBTX, p DestinationParams) error {
	var ordering *string
	if p.Ordering != "" {
		ordering = &p.Ordering
	}
	_, err := db.Exec(ctx, registerDestinationSQL, p.Destination, p.ConsumerName, p.ReceiptKind, p.ReceiptType,
		p.ReceiptSchemaVersion, p.ProjectionRequired, ordering)
	return interpretError("register destination", err)
}
