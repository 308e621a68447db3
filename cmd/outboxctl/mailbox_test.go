package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// R-MX-8, R-MX-12: `outboxctl mailbox status` shows the pipeline (as outbox_auditor) with the rows
// needing attention; `outboxctl mailbox resolve` resolves an abandoned backfill (audited), after
// which status no longer counts it; a wrong state is refused with OB402.
func TestMailboxStatusAndResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	reg := testdb.Conn(t, dsn, "outbox_registrar")
	if err := pgcall.RegisterMailboxSource(ctx, reg, pgcall.MailboxSourceParams{Source: "box", HoleReleaseAfter: time.Hour, BackfillDeadline: time.Hour}); err != nil {
		t.Fatal(err)
	}
	mb := testdb.Conn(t, dsn, "outbox_mailbox")
	if _, err := pgcall.RecordDiscovery(ctx, mb, "box", []pgcall.MailboxRow{{MsgID: 1, Message: []byte(`{}`)}, {MsgID: 3, Message: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	h, err := pgcall.ClaimHead(ctx, mb, "box", "w", time.Minute)
	if err != nil || h == nil {
		t.Fatalf("claim: %v", err)
	}
	if err := pgcall.CompleteHead(ctx, mb, "box", 1, h.LeaseToken, pgcall.HeadSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := pgcall.RecordBackfill(ctx, mb, "box", 1, pgcall.BackfillMissing); err != nil || res != pgcall.BackfillAbandoned {
		t.Fatalf("record backfill: %s %v", res, err)
	}
	var out bytes.Buffer
	if err := run(ctx, dsn, []string{"mailbox", "status", "box"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"watermark                 1", "abandoned backfills       1", "1 open ids", "1       abandoned  missing"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run(ctx, dsn, []string{"mailbox", "resolve", "box", "1", "marked_manually", "set by hand, ticket 9"}, &out); err != nil {
		t.Fatal(err)
	}
	err = run(ctx, dsn, []string{"mailbox", "resolve", "box", "1", "marked_manually", "again"}, &out)
	if !errors.Is(err, pgcall.ErrMailboxWrongState) {
		t.Fatalf("second resolve: %v", err)
	}
	out.Reset()
	if err := run(ctx, dsn, []string{"mailbox", "status", "box", "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"AbandonedBackfills": 0`) {
		t.Fatalf("after resolve:\n%s", out.String())
	}
	if err := run(ctx, dsn, []string{"mailbox", "frobnicate"}, &out); !errors.Is(err, errUsage) {
		t.Fatalf("unknown subcommand: %v", err)
	}
}
