//go:build bench

package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

// BenchmarkRawCeiling measures the machine's own ceiling in the same run as the kernel
// benchmarks (issue "Proof under fire", item 6): single-row INSERT commits per second with 8
// concurrent clients, and rows per second with 100-row multi-row INSERTs on one client, into an
// unconstrained table with a ~1 KiB jsonb payload, fsync and synchronous_commit on.
func BenchmarkRawCeiling(b *testing.B) {
	ctx := context.Background()
	dsn := testdb.URL(b)
	pool := testdb.Pool(b, dsn)
	if _, err := pool.Exec(ctx, `CREATE TABLE public.ceiling (id bigserial PRIMARY KEY, payload jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	doc := string(payload1K(1))
	b.Run("single_row_commits_8_clients", func(b *testing.B) {
		const clients = 8
		var wg sync.WaitGroup
		per := (b.N + clients - 1) / clients
		b.ResetTimer()
		start := time.Now()
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if _, err := pool.Exec(ctx, `INSERT INTO public.ceiling (payload) VALUES ($1::jsonb)`, doc); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(per*clients)/time.Since(start).Seconds(), "commits/s")
	})
	b.Run("batch_100_rows_1_client", func(b *testing.B) {
		var sb strings.Builder
		sb.WriteString(`INSERT INTO public.ceiling (payload) VALUES `)
		args := make([]any, 100)
		for i := 0; i < 100; i++ {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "($%d::jsonb)", i+1)
			args[i] = doc
		}
		q := sb.String()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if _, err := pool.Exec(ctx, q, args...); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(100*b.N)/time.Since(start).Seconds(), "rows/s")
	})
}

// BenchmarkWriteAmplification measures, on the producer database, the WAL bytes and the rows
// written per delivered event for the kernel's own path with one destination and a ~1 KiB
// payload: append_event (hot path) → claim_deliveries (batch 100) → ack_delivery → published.
// (The consumer's receipt lives in the consumer's database and is not counted here.)
// Rows per event counts the rows inserted or updated in outbox tables (pg_stat_user_tables).
func BenchmarkWriteAmplification(b *testing.B) {
	ctx := context.Background()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	testfix.ActivateReference(b, admin)
	prod := testdb.Conn(b, dsn, "outbox_producer")
	disp := testdb.Conn(b, dsn, "outbox_dispatcher")
	n := b.N
	if n < 200 {
		n = 200
	}
	lsn := func() string {
		var s string
		if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
			b.Fatal(err)
		}
		return s
	}
	rows := func() int64 {
		var v int64
		if _, err := admin.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if err := admin.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = 'outbox'`).Scan(&v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	rows0 := rows()
	start := lsn()
	b.ResetTimer()
	for i := 0; i < n; i++ {
		if _, err := producer.Append(ctx, prod, benchEvent("execution.attempt-eligibility.finalized@1", "1", i)); err != nil {
			b.Fatal(err)
		}
	}
	done := 0
	for done < n {
		claimed, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "wal-bench", Destinations: []string{"metering_input_processor"}, BatchSize: 100, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(claimed) == 0 {
			b.Fatalf("nothing to claim after %d of %d", done, n)
		}
		for _, c := range claimed {
			ack, receipt := benchReceipt(b, c)
			if _, err := pgcall.AckDelivery(ctx, disp, pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}, ack, receipt); err != nil {
				b.Fatal(err)
			}
			done++
		}
	}
	b.StopTimer()
	end := lsn()
	var wal float64
	if err := admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8`, end, start).Scan(&wal); err != nil {
		b.Fatal(err)
	}
	var published int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM outbox.outbox_publications`).Scan(&published); err != nil {
		b.Fatal(err)
	}
	if published != n {
		b.Fatalf("published %d of %d", published, n)
	}
	b.ReportMetric(wal/float64(n), "WAL_bytes/event")
	b.ReportMetric(float64(rows()-rows0)/float64(n), "rows_written/event")
}
