//go:build bench

package bench

// BenchmarkClaim100Backlog (SPEC P-4, R-CL-6, HP-3, HP-5): the latency of one
// claim_deliveries(batch 100) at backlogs of 10^3, 10^4, 10^5 and 10^6 pending deliveries of the
// claimed destination, each in a database of its own filled once by benchBacklog (INSERT ...
// SELECT as outbox_owner, every trigger active, real digests), claims interleaved round-robin in
// one run so that machine noise hits every size alike. Each claim runs in BEGIN ... ROLLBACK, so
// the backlog stays constant. Reported per size: mean and median µs per claim, and the ratios
// to 10^3 (P-4: ≤ 1.5× and ≤ 2 ms). After the timed loop the benchmark logs
//   - the plan the claim statement ran with at 10^6 (auto_explain at NOTICE level, nested
//     statements, so the plan of the EXECUTE inside the function is shown; HP-3), and
//   - the HOT ratio of outbox_deliveries (n_tup_hot_upd / n_tup_upd over the run; HP-5).

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

type claimSide struct {
	name  string
	n     int
	dsn   string
	admin *pgx.Conn
	disp  *pgx.Conn
	took  []time.Duration
}

func BenchmarkClaim100Backlog(b *testing.B) {
	ctx := context.Background()
	sides := []*claimSide{{name: "1e3", n: 1000}, {name: "1e4", n: 10000}, {name: "1e5", n: 100000}, {name: "1e6", n: 1000000}}
	for _, s := range sides {
		t0 := time.Now()
		s.dsn = testdb.URL(b)
		s.admin = testdb.Conn(b, s.dsn, "")
		testfix.ActivateReference(b, s.admin)
		benchBacklog(b, s.admin, s.n)
		s.disp = testdb.Conn(b, s.dsn, "outbox_dispatcher")
		b.Logf("backlog %s filled in %s", s.name, time.Since(t0).Round(time.Millisecond))
	}
	claim := func(b *testing.B, s *claimSide, conn *pgx.Conn) time.Duration {
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback(ctx)
		t0 := time.Now()
		cs, err := pgcall.ClaimDeliveries(ctx, tx, pgcall.ClaimParams{Worker: "bench", Destinations: []string{benchDest}, BatchSize: 100, Lease: time.Minute})
		d := time.Since(t0)
		if err != nil || len(cs) != 100 {
			b.Fatalf("%s claim: %d rows, %v", s.name, len(cs), err)
		}
		return d
	}
	// The backlogs are filled once, here; the timed loop is a sub-benchmark, so the testing
	// package's probe run (b.N = 1) and the timed run reuse them.
	b.Run("claim_100", func(b *testing.B) { claim100Timed(b, sides, claim) })
}

func claim100Timed(b *testing.B, sides []*claimSide, claim func(*testing.B, *claimSide, *pgx.Conn) time.Duration) {
	ctx := context.Background()
	for _, s := range sides {
		s.took = s.took[:0]
	}
	for i := 0; i < 20; i++ { // warm up caches and the plan cache (a generic plan would be made here)
		for _, s := range sides {
			claim(b, s, s.disp)
		}
	}
	var hot0, upd0 []int64
	stat := func(s *claimSide) (hot, upd int64) {
		if _, err := s.admin.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		if err := s.admin.QueryRow(ctx, `SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables
			WHERE relid = 'outbox.outbox_deliveries'::regclass`).Scan(&hot, &upd); err != nil {
			b.Fatal(err)
		}
		return
	}
	for _, s := range sides {
		h, u := stat(s)
		hot0, upd0 = append(hot0, h), append(upd0, u)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sides {
			s.took = append(s.took, claim(b, s, s.disp))
		}
	}
	b.StopTimer()
	mean := func(ds []time.Duration) float64 {
		var t time.Duration
		for _, d := range ds {
			t += d
		}
		return float64(t) / float64(len(ds)) / 1e3
	}
	median := func(ds []time.Duration) float64 {
		c := append([]time.Duration(nil), ds...)
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
		return float64(c[len(c)/2]) / 1e3
	}
	base := median(sides[0].took)
	for i, s := range sides {
		b.ReportMetric(mean(s.took), "backlog_"+s.name+"_mean_µs/claim")
		b.ReportMetric(median(s.took), "backlog_"+s.name+"_p50_µs/claim")
		if i > 0 {
			b.ReportMetric(median(s.took)/base, "ratio_p50_"+s.name+"/1e3")
		}
	}
	for i, s := range sides {
		h, u := stat(s)
		if u > upd0[i] {
			b.Logf("backlog %s: HOT updates of outbox_deliveries %d of %d (%.0f %%)", s.name, h-hot0[i], u-upd0[i],
				100*float64(h-hot0[i])/float64(u-upd0[i]))
		}
	}
	// The plan of the claim statement at 10^6 (HP-3): auto_explain reports nested statements at
	// NOTICE, which the client receives; one connection of its own, as outbox_dispatcher.
	large := sides[len(sides)-1]
	cfg, err := pgx.ParseConfig(large.dsn)
	if err != nil {
		b.Fatal(err)
	}
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "outbox_deliveries") {
			plans = append(plans, n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
		`SET auto_explain.log_nested_statements = on`, `SET auto_explain.log_analyze = on`,
		`SET auto_explain.log_buffers = on`, `SET auto_explain.log_timing = on`, `SET auto_explain.log_level = notice`,
		`SET ROLE outbox_dispatcher`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	claim(b, large, conn)
	for _, p := range plans {
		b.Logf("plan at backlog %s:\n%s", large.name, p)
	}
}
