package consumerfix

import (
	"context"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// RegisterProjectionVersion registers projection version name@version with semantic digest 'unknown' (R-PV-1):
// the first version of a projection is active, like the versions a delivery-set activation
// registers. Tests that record receipts without activating a delivery set call it first.
func RegisterProjectionVersion(t testing.TB, db pgcall.DBTX, name string, version int) {
	t.Helper()
	if _, err := pgcall.RegisterProjectionVersion(context.Background(), db, name, version, pgcall.UnknownSemanticDigest); err != nil {
		t.Fatalf("register projection version %s@%d: %v", name, version, err)
	}
}
