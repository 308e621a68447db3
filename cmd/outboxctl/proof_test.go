package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// R-OP-2, R-OP-3: outboxctl proof take / check / show / search as outbox_auditor.
func TestProofCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	testfix.ActivateReference(t, admin)
	id := testfix.Append(t, admin, testfix.Envelope(statusEventType, "1", "agg-proof", 1))
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, dsn, args, &out); err != nil {
			t.Fatalf("outboxctl %v: %v", args, err)
		}
		return out.String()
	}
	out := run("proof", "take")
	if !strings.Contains(out, "status partial_source_gap") {
		t.Fatalf("take: %s", out)
	}
	manifest := strings.Fields(strings.SplitN(out, "\n", 2)[0])[1]
	if got := run("proof", "check", manifest); got != "verified_current -\n" {
		t.Fatalf("check: %q", got)
	}
	if got := run("proof", "show", manifest); !strings.Contains(got, `"eventId":"`+id+`"`) {
		t.Fatalf("show: %s", got)
	}
	if got := run("proof", "search", "eventId", id); !strings.HasPrefix(got, "matched - "+id) {
		t.Fatalf("search: %q", got)
	}
	if got := run("proof", "search", "runId", "none"); got != "inconclusive pending_deliveries - -\n" {
		t.Fatalf("search: %q", got)
	}
	if got := run("proof", "take", "-inbox-db", dsn); !strings.Contains(got, `"part":"projector_inbox"`) || !strings.Contains(got, "status partial_source_gap") {
		t.Fatalf("two-part take: %s", got)
	}
	if err := run2(ctx, dsn, "proof", "take", `{"eventTypes":"x"}`); err == nil {
		t.Fatal("a malformed scope was accepted")
	}
}

func run2(ctx context.Context, dsn string, args ...string) error {
	var out bytes.Buffer
	return run(ctx, dsn, args, &out)
}
