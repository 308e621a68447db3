package main

// The runbook with the shipped binary (issue 37 item 5, SPEC R-PV-1, R-PV-2): refconsumer
// -rebuild builds a shadow version of the operations projection from the kernel's history into
// its own schema, stops on the empty batch, and after the freeze catches up with the new token;
// -dual-apply is checked before anything starts.

import (
	"context"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
)

func TestRefconsumerRebuildFlags(t *testing.T) {
	ctx := context.Background()
	b := consumerfix.Setup(t)
	admin := testdb.Conn(t, b.Dsn, "")
	testfix.ActivateReference(t, admin)
	producer := testdb.Conn(t, b.Dsn, "outbox_producer")
	if err := (scenario.Producer{Conn: producer, Prefix: "rc"}).Runs(ctx, 1, 4); err != nil {
		t.Fatal(err)
	}
	reg := testdb.Conn(t, b.Dsn, "outbox_registrar")
	if _, err := pgcall.RegisterProjectionVersion(ctx, reg, reference.ProjectionName, 2, "unknown"); err != nil {
		t.Fatal(err)
	}
	projector := testdb.Conn(t, b.Dsn, "outbox_projector")
	build, err := pgcall.StartShadowBuild(ctx, projector, reference.ProjectionName, 2)
	testfix.Must(t, err)
	name := reference.OperationsProjector
	args := func(token string) []string {
		return []string{"-rebuild", name, "-projection-version", name + "=2", "-build-id", build.BuildID, "-build-token", token,
			"-database-url", b.Dsn, "-role", consumerfix.Role, "-projector-role", "outbox_projector", "-rebuild-batch", "3"}
	}
	receipts := func() int {
		return consumerfix.Count(t, admin, `SELECT count(*) FROM inbox.inbox_receipts WHERE consumer_name = $1 AND projection_version = 2`, name)
	}
	if err := run(args(build.BuildToken)); err != nil {
		t.Fatalf("refconsumer -rebuild: %v", err)
	}
	built := receipts()
	if built == 0 {
		t.Fatal("the rebuild wrote no receipt under version 2")
	}
	if n := consumerfix.Count(t, admin, `SELECT count(*) FROM refconsumer_operations_v2.effects`); n == 0 {
		t.Fatal("the rebuild wrote nothing into the version's own schema refconsumer_operations_v2")
	}
	// after the freeze: the old token is dead, the new one catches up (nothing new here) and ends on the empty batch
	fz, err := pgcall.FreezeCutoverCandidate(ctx, projector, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	if err := run(args(build.BuildToken)); err == nil || !strings.Contains(err.Error(), "fencing") {
		t.Fatalf("-rebuild with the pre-freeze token: %v, want the fencing rejection", err)
	}
	if err := run(args(fz.BuildToken)); err != nil {
		t.Fatalf("-rebuild after the freeze: %v", err)
	}
	if n := receipts(); n != built {
		t.Fatalf("%d receipts after the catch-up, want %d", n, built)
	}
	// flag checks before anything starts
	for _, bad := range [][]string{
		{"-rebuild", name, "-build-id", build.BuildID, "-database-url", b.Dsn},
		{"-dual-apply", name + "=1", "-database-url", b.Dsn, "-insecure-no-auth", "-consumers", name},
		{"-dual-apply-token", name + "=x", "-database-url", b.Dsn, "-insecure-no-auth", "-consumers", name},
		{"-projection-version", name + "=0", "-database-url", b.Dsn, "-insecure-no-auth", "-consumers", name},
	} {
		if err := run(bad); err == nil {
			t.Fatalf("refconsumer %v started", bad)
		}
	}
}
