package kernelfix

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// RetentionBundle is a Bundle with the retention, auditor and consumer connections.
type RetentionBundle struct {
	Bundle
	Ret     *pgx.Conn // SET ROLE outbox_retention
	Auditor *pgx.Conn // SET ROLE outbox_auditor
	Cons    *pgx.Conn // SET ROLE outbox_consumer
}

// rtDelivered appends one metering event, records the consumer's receipt and acks it: every
// delivery terminal, published.
func (b RetentionBundle) RtDelivered(t *testing.T) string {
	t.Helper()
	id := Append(t, b.Admin, Metering, "agg-"+testfix.NewUUID(), 1)
	c := ClaimOne(t, b.Disp, WorkerA, LongLease, DestMetering)
	if c.EventID != id {
		t.Fatalf("claimed %s, want %s", c.EventID, id)
	}
	ack, rc := ValidAck(t, c)
	if _, err := pgcall.RecordReceipt(context.Background(), b.Cons, pgcall.RecordReceiptParams{ConsumerName: c.ConsumerName,
		EventEnvelope: c.EventEnvelope, Receipt: rc}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.AckDelivery(context.Background(), b.Disp, FenceOf(c), ack, rc); err != nil {
		t.Fatal(err)
	}
	return id
}

// rtQuarantined appends one metering event whose only delivery is retried once, then quarantined.
func (b RetentionBundle) RtQuarantined(t *testing.T, resolved bool) string {
	t.Helper()
	ctx := context.Background()
	id := Append(t, b.Admin, Metering, "agg-"+testfix.NewUUID(), 1)
	if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() WHERE event_id = $1::uuid`, id); err != nil {
		t.Fatal(err)
	}
	c := ClaimOne(t, b.Disp, WorkerA, LongLease, DestMetering)
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, FenceOf(c), "unsupported_schema", "unsupported_schema", nil); err != nil {
		t.Fatal(err)
	}
	if resolved {
		if _, err := b.Admin.Exec(ctx, `UPDATE outbox.outbox_quarantine SET acknowledged_at = now(), case_id = 'case-1' WHERE event_id = $1::uuid`, id); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// Archive runs outbox.archive_events on db (pgcall.ArchiveEvents); the test fails on error.
func Archive(t *testing.T, db *pgx.Conn, olderThan time.Duration, maxRows int) pgcall.ArchiveRun {
	t.Helper()
	r, err := pgcall.ArchiveEvents(context.Background(), db, olderThan, maxRows)
	if err != nil {
		t.Fatalf("archive_events: %v", err)
	}
	return r
}
