//go:build bench

package bench

// BenchmarkOutcomeBatches: retry_deliveries and quarantine_deliveries of a claimed batch of 100
// (SPEC R-AK-9, HP-1, HP-2): deliveries/s of the outcome call alone (the claim is not timed).
// With BenchmarkClaimAck/batch_100 it covers the three batch outcome functions that share one
// item parser (outbox._outcome_items, migration 039). retry: errorCode transport_error, back to
// pending after the backoff; quarantine: reason consumer_rejected, terminal.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

func BenchmarkOutcomeBatches(b *testing.B) {
	for _, kind := range []string{"retry", "quarantine"} {
		b.Run(fmt.Sprintf("%s_batch_100", kind), func(b *testing.B) {
			ctx := context.Background()
			dsn := testdb.URL(b)
			admin := testdb.Conn(b, dsn, "")
			testfix.ActivateReference(b, admin)
			benchBacklog(b, admin, b.N)
			disp := testdb.Conn(b, dsn, "outbox_dispatcher")
			ref := "bench ref"
			var took time.Duration
			done := 0
			b.ResetTimer()
			for done < b.N {
				b.StopTimer()
				cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "bench", Destinations: []string{benchDest},
					BatchSize: min(100, b.N-done), Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				if len(cs) == 0 {
					b.Fatalf("backlog exhausted after %d of %d", done, b.N)
				}
				b.StartTimer()
				start := time.Now()
				var outs []pgcall.ItemOutcome
				if kind == "retry" {
					items := make([]pgcall.RetryItem, len(cs))
					for i, c := range cs {
						items[i] = pgcall.RetryItem{Fence: pgcall.Fence{Destination: c.Destination, EventID: c.EventID,
							AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}, ErrorCode: "transport_error", ErrorRef: &ref}
					}
					outs, err = pgcall.RetryDeliveries(ctx, disp, items)
				} else {
					items := make([]pgcall.QuarantineItem, len(cs))
					for i, c := range cs {
						items[i] = pgcall.QuarantineItem{Fence: pgcall.Fence{Destination: c.Destination, EventID: c.EventID,
							AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}, Reason: "consumer_rejected", ErrorCode: "consumer_rejected", ErrorRef: &ref}
					}
					outs, err = pgcall.QuarantineDeliveries(ctx, disp, items)
				}
				took += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range outs {
					if err := o.Err(); err != nil {
						b.Fatal(err)
					}
				}
				done += len(cs)
			}
			b.StopTimer()
			b.ReportMetric(float64(done)/took.Seconds(), "deliveries/s")
		})
	}
}
