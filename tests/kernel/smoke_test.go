package kernel

import (
	"context"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// The migrated database has the kernel schema, owned by outbox_owner (R-SEC-2).
func TestMigratedSchemaOwnedByOwner(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	var owner string
	if err := pool.QueryRow(context.Background(),
		`SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'outbox'`).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if owner != "outbox_owner" {
		t.Fatalf("outbox schema owner = %q, want outbox_owner", owner)
	}
}
