//go:build bench

package bench

// BenchmarkPipeline is the end-to-end figure of the performance issue: append → claim → deliver
// to an in-process consumer that writes its receipt (the real consumer kit with the reference
// consumers, in their own database) → ack_delivery → published, for 1 and 4 destinations and
// claim batch sizes 1, 10 and 100, from a pre-appended backlog; and the same with appends running
// concurrently. b.N is the number of events. With track_functions = 'pl' on both databases it
// also reports where the database time goes: the self time per delivered event of the costliest
// kernel and inbox functions (µs/event), read from pg_stat_user_functions.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

func BenchmarkPipeline(b *testing.B) {
	type variant struct {
		concurrent bool
		dests      int
		batch      int
	}
	var vs []variant
	for _, n := range []int{1, 4} {
		for _, batch := range []int{1, 10, 100} {
			vs = append(vs, variant{false, n, batch})
		}
		vs = append(vs, variant{true, n, 100})
	}
	for _, v := range vs {
		mode := "backlog"
		if v.concurrent {
			mode = "concurrent_appends"
		}
		b.Run(fmt.Sprintf("%s/%ddest/batch%d", mode, v.dests, v.batch), func(b *testing.B) {
			ctx := context.Background()
			dsn := testdb.URL(b)
			admin := testdb.Conn(b, dsn, "")
			testfix.ActivateReference(b, admin)
			consumerDSN := testdb.URL(b)
			cadmin := testdb.Conn(b, consumerDSN, "")
			for _, conn := range []*pgx.Conn{admin, cadmin} {
				if _, err := conn.Exec(ctx, `SELECT set_config('track_functions', 'pl', false)`); err != nil {
					b.Fatal(err)
				}
			}
			for _, db := range []string{dsn, consumerDSN} {
				if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{dbName(b, db)}.Sanitize()+" SET track_functions = 'pl'"); err != nil {
					b.Fatal(err)
				}
			}
			cpool := testdb.Pool(b, consumerDSN)
			cons := map[string]wire.Consumer{}
			cfg := dispBenchConfig(v.dests, config.TransportInProcess, "")
			cfg.BatchSize = v.batch
			for _, spec := range reference.All() {
				if _, ok := cfg.Destinations[spec.Destination]; !ok {
					continue
				}
				if err := spec.Install(ctx, cadmin, "outbox_consumer"); err != nil {
					b.Fatal(err)
				}
				kit, err := spec.New(context.Background(), cpool, func(c *consumer.Config) { c.Role = "outbox_consumer"; c.InsecureNoAuth = true })
				if err != nil {
					b.Fatal(err)
				}
				cons[spec.Destination] = kit
			}
			ip := transport.NewInProcess(cons)
			trs := map[string]transport.Transport{}
			for name := range cfg.Destinations {
				trs[name] = ip
			}
			b.StopTimer()
			if !v.concurrent {
				dispBenchAppend(b, dsn, v.dests, b.N)
			}
			resetFunctionStats(b, admin, cadmin)
			b.StartTimer()
			start := time.Now()
			r := dispBenchStart(b, dsn, cfg, trs)
			defer r.stop()
			var wg sync.WaitGroup
			if v.concurrent {
				// Four producers append while the dispatcher works (one event per transaction).
				wg.Add(4)
				for p := 0; p < 4; p++ {
					go func(p int) {
						defer wg.Done()
						conn := testdb.Conn(b, dsn, "")
						for i := p; i < b.N; i += 4 {
							x := dispBenchDests[i%v.dests]
							testfix.AppendHot(b, conn, testfix.Envelope(x.eventType, x.schema, "pipe-"+strconv.Itoa(i), 1))
						}
					}(p)
				}
			}
			for r.acked(v.dests) < float64(b.N) {
				time.Sleep(time.Millisecond)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			wg.Wait()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			reportFunctionStats(b, admin, cadmin, b.N)
		})
	}
}

func dbName(b *testing.B, dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	return cfg.Database
}

func resetFunctionStats(b *testing.B, conns ...*pgx.Conn) {
	for _, c := range conns {
		if _, err := c.Exec(context.Background(), `SELECT pg_stat_reset()`); err != nil {
			b.Fatal(err)
		}
	}
}

// reportFunctionStats reports the self time per event of the three costliest functions of each
// database (the numbers behind "where the time goes" in docs/performance-notes.md).
func reportFunctionStats(b *testing.B, producerDB, consumerDB *pgx.Conn, events int) {
	ctx := context.Background()
	time.Sleep(600 * time.Millisecond) // let backends flush their function statistics
	for side, c := range map[string]*pgx.Conn{"producer": producerDB, "consumer": consumerDB} {
		rows, err := c.Query(ctx, `SELECT funcname, self_time FROM pg_stat_user_functions
			WHERE schemaname IN ('outbox', 'inbox') ORDER BY self_time DESC LIMIT 3`)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var name string
			var ms float64
			if err := rows.Scan(&name, &ms); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(ms*1000/float64(events), side+"_"+name+"_self_µs/event")
		}
		rows.Close()
	}
}
