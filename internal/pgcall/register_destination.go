package pgcall

import "context"

// Orderings of a destination (SPEC R-CL-7).
const (
	OrderingNone         = "none"
	OrderingPerAggregate = "per_aggregate"
)

// DestinationParams are the arguments of outbox.register_destination (SPEC §2, R-CL-7).
type DestinationParams struct {
	Destination          string
	ConsumerName         string
	ReceiptKind          string // a registered receipt kind
	ReceiptType          string
	ReceiptSchemaVersion int
	ProjectionRequired   bool
	Ordering             string // OrderingNone or OrderingPerAggregate; "" is OrderingNone (the SQL default)
}

const registerDestinationSQL = `SELECT outbox.register_destination($1::text, $2::text, $3::text, $4::text, $5::integer, $6::boolean, $7::text)`

// RegisterDestination calls outbox.register_destination: insert-or-compare of one destination
// of the canonical registry, bound to its consumer, receipt type and ordering; registering the
// same destination again is a no-op. ErrDefinitionInvalid (OB101) bad values or a destination
// already bound otherwise. Caller role: outbox_registrar.
func RegisterDestination(ctx context.Context, db DBTX, p DestinationParams) error {
	ordering := p.Ordering
	if ordering == "" {
		ordering = OrderingNone
	}
	_, err := db.Exec(ctx, registerDestinationSQL, p.Destination, p.ConsumerName, p.ReceiptKind, p.ReceiptType,
		p.ReceiptSchemaVersion, p.ProjectionRequired, ordering)
	return interpretError("register destination", err)
}
