package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// R-AK-7, issue 34 item 3: the dispatcher reads the normalized error codes from
// outbox.error_codes at preflight (no copy in Go). Two codes added to the table before the start,
// which no Go source names, are treated exactly as the table classes them: a retryable one is
// retried under its own code (503) and refused as a non-retryable answer (409 → retryable
// consumer_unavailable); a non-retryable one quarantines (409) under its own code. A code the
// table does not hold stays retryable consumer_unavailable, as before.
func TestDispatcherErrorCodesFromTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dispatcherfix.Setup(t, dispatcherfix.MeteringDest)
	testfix.Must(t, pgx.BeginFunc(ctx, db.Admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE outbox_owner`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO outbox.error_codes (code, retryable, description)
			VALUES ('dp_shelf_busy', true, 'test: the shelf is busy'), ('dp_shelf_gone', false, 'test: the shelf is gone')`)
		return err
	}))
	evA, evB := db.AppendMetering(t), db.AppendMetering(t)
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		if d.EventID == evB {
			return dispatcherfix.Reply{Kind: "status", Code: 409, Body: `{"code":"dp_shelf_gone","ref":"shelf:7"}`}
		}
		switch call {
		case 1:
			return dispatcherfix.Reply{Kind: "status", Code: 503, Body: `{"code":"dp_shelf_busy"}`}
		case 2:
			return dispatcherfix.Reply{Kind: "status", Code: 409, Body: `{"code":"dp_shelf_busy"}`}
		case 3:
			return dispatcherfix.Reply{Kind: "status", Code: 503, Body: `{"code":"dp_not_in_table"}`}
		}
		return dispatcherfix.Reply{Kind: "ack"}
	})
	srv, h := dispatcherfix.HTTPConsumer(t, c, 5*time.Second)
	cfg := dispatcherfix.Config("dp-codes", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: h})

	dispatcherfix.Eventually(t, "A acknowledged, B quarantined", func() bool {
		return db.Status(t, dispatcherfix.MeteringDest, evA) == "acknowledged" && db.Status(t, dispatcherfix.MeteringDest, evB) == "quarantined"
	})
	want := []dispatcherfix.Attempt{
		{Number: 1, Worker: "dp-codes", Outcome: "retryable", Code: "dp_shelf_busy"},
		{Number: 2, Worker: "dp-codes", Outcome: "retryable", Code: "consumer_unavailable"},
		{Number: 3, Worker: "dp-codes", Outcome: "retryable", Code: "consumer_unavailable"},
		{Number: 4, Worker: "dp-codes", Outcome: "acknowledged", Code: ""},
	}
	got := db.Attempts(t, dispatcherfix.MeteringDest, evA)
	if len(got) != len(want) {
		t.Fatalf("attempts of A %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("attempt %d of A = %+v, want %+v", i+1, got[i], want[i])
		}
	}
	gotB := db.Attempts(t, dispatcherfix.MeteringDest, evB)
	if len(gotB) != 1 || gotB[0].Outcome != "non_retryable" || gotB[0].Code != "dp_shelf_gone" {
		t.Fatalf("attempts of B %+v, want one non_retryable dp_shelf_gone", gotB)
	}
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_quarantine WHERE event_id = $1::uuid AND reason = 'dp_shelf_gone'`, evB); n != 1 {
		t.Fatalf("%d quarantine rows for B with reason dp_shelf_gone", n)
	}
	codes := r.D.Codes()
	if codes == nil || !codes.Retryable("dp_shelf_busy") || !codes.NonRetryable("dp_shelf_gone") || codes.Retryable("dp_not_in_table") ||
		codes.NonRetryable("dp_not_in_table") || !codes.Retryable("consumer_unavailable") || !codes.NonRetryable("retry_exhausted") {
		t.Fatal("the dispatcher's codes are not the table's")
	}
	if err := r.Stop(t); err != nil {
		t.Fatalf("drain: %v", err)
	}
}
