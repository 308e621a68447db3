package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// D-1: `outboxctl reference install` (make migrate-reference) on a kernel-only database
// installs the reference release - afterwards `release activate-reference` succeeds - and a
// second run is a no-op.
func TestReferenceInstall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.KernelURL(t)
	admin := testdb.Conn(t, dsn, "")
	count := func() string {
		var s string
		if err := admin.QueryRow(ctx, `SELECT concat_ws(',', (SELECT count(*) FROM outbox.delivery_destinations),
		        (SELECT count(*) FROM outbox.receipt_kinds), (SELECT count(*) FROM outbox.envelope_refinements),
		        (SELECT count(*) FROM intake.observation_schemas))`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var out bytes.Buffer
	if err := run(ctx, dsn, []string{"release", "activate-reference"}, &out); err == nil {
		t.Fatal("activate-reference on a kernel-only database succeeded: it has no destination")
	}
	if err := run(ctx, dsn, []string{"reference", "install"}, &out); err != nil {
		t.Fatal(err)
	}
	first := count()
	if first != "4,5,5,2" {
		t.Fatalf("after reference install: destinations,kinds,refinement rows,observation schemas = %s, want 4,5,5,2", first)
	}
	if err := run(ctx, dsn, []string{"reference", "install"}, &out); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if again := count(); again != first {
		t.Fatalf("second run changed the counts: %s -> %s", first, again)
	}
	if err := run(ctx, dsn, []string{"release", "activate-reference"}, &out); err != nil {
		t.Fatalf("activate-reference after reference install: %v", err)
	}
	if err := run(ctx, dsn, []string{"reference", "frobnicate"}, &out); !errors.Is(err, errUsage) {
		t.Fatalf("bad usage: %v", err)
	}
}
