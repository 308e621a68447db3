package pgcall

import (
	"context"
	"time"
)

// Fence identifies one live lease: the delivery (destination, event), its current attempt and
// the lease token handed out by the claim (R-CL-3).
type Fence struct {
	Destination, EventID, AttemptID, LeaseToken string
}

const renewLeaseSQL = `SELECT outbox.renew_lease($1::text, $2::uuid, $3::uuid, $4::uuid, $5::interval)`

// RenewLease calls outbox.renew_lease: extends a live lease to now()+lease and returns the new
// expiry; ErrFencingRejected (OB001) when the fence no longer holds. Caller role:
// outbox_dispatcher.
func RenewLease(ctx context.Context, db DBTX, f Fence, lease time.Duration) (time.Time, error) {
	var t time.Time
	err := db.QueryRow(ctx, renewLeaseSQL, f.Destination, f.EventID, f.AttemptID, f.LeaseToken, intervalString(lease)).Scan(&t)
	return t, interpretError("renew lease", err)
}
