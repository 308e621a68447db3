//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

// BenchmarkAppendTxnSize appends 1,000 / 10,000 / 50,000 events in ONE producer transaction
// (issue 35 item 6: a backfill or bulk import), one outbox.append_event call per event ("single")
// and outbox.append_events in batches of 500 ("batched"), and reports µs per event including the
// COMMIT with its delivery-set proof (R-AP-5). Per-append cost must stay flat across the sizes
// (≤ 1.5× between them). BENCH_APPEND_TXN_SIZES (comma-separated) overrides the sizes.
func BenchmarkAppendTxnSize(b *testing.B) {
	sizes := []int{1000, 10000, 50000}
	if s := os.Getenv("BENCH_APPEND_TXN_SIZES"); s != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	ctx := context.Background()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	testfix.ActivateReference(b, admin)
	conn := testdb.Conn(b, dsn, "outbox_producer")
	const eventType, batch = "execution.run-finalization.closed@1", 500
	run := 0
	event := func(i int) producer.Event {
		ev := benchEvent(eventType, "1", i)
		ev.AggregateID = fmt.Sprintf("txn-%d-%d", run, i) // a new aggregate each: no parked chains
		return ev
	}
	for _, mode := range []string{"single", "batched"} {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s_%d", mode, n), func(b *testing.B) {
				var spent time.Duration
				for it := 0; it < b.N; it++ {
					run++
					start := time.Now()
					tx, err := conn.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if mode == "single" {
						for i := 0; i < n; i++ {
							if _, err := producer.Append(ctx, tx, event(i)); err != nil {
								b.Fatalf("append %d: %v", i, err)
							}
						}
					} else {
						for i := 0; i < n; i += batch {
							evs := make([]producer.Event, 0, batch)
							for k := i; k < i+batch && k < n; k++ {
								evs = append(evs, event(k))
							}
							if _, err := producer.AppendMany(ctx, tx, evs); err != nil {
								b.Fatalf("append_events at %d: %v", i, err)
							}
						}
					}
					if err := tx.Commit(ctx); err != nil {
						b.Fatal(err)
					}
					spent += time.Since(start)
				}
				b.ReportMetric(float64(spent.Microseconds())/float64(b.N*n), "µs/event")
			})
		}
	}
}
