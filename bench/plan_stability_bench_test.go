//go:build bench

package bench

// BenchmarkPlanStability (SPEC §12a HP-3): the batch path append_events → claim_deliveries →
// ack_deliveries run twice in ONE session on a fresh, never analyzed database: run 1 on a small
// backlog (PLAN_N1, default 1,000), run 2 on a larger one (PLAN_N2, default 10,000). HP-3 wants
// the per-item times of the two runs within 1.5x. Sub-benchmarks autovacuum_off and
// autovacuum_on; b.N is ignored. Run 2's plans go to the file named by PLAN_OUT.
//
// What is reported and why: docs/benchmarks.md#benchmarkplanstability-benchplan_stability_bench_testgo.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func BenchmarkPlanStability(b *testing.B) {
	for _, autovacuum := range []bool{false, true} {
		name := "autovacuum_off"
		if autovacuum {
			name = "autovacuum_on"
		}
		b.Run(name, func(b *testing.B) { planStability(b, autovacuum) })
	}
}

type planRun struct {
	n                      int
	appendDur, dispatchDur time.Duration
	appendPer, dispatchPer float64 // µs per item
	pathPer                float64
}

func planStability(b *testing.B, autovacuum bool) {
	ctx := context.Background()
	n1, n2 := envInt("PLAN_N1", 1000), envInt("PLAN_N2", 10000)
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	testfix.ActivateReference(b, admin)
	if !autovacuum {
		if _, err := admin.Exec(ctx, `DO $$DECLARE r regclass; BEGIN
			FOR r IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			          WHERE n.nspname = 'outbox' AND c.relkind IN ('r', 'p') LOOP
				EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', r);
			END LOOP; END$$`); err != nil {
			b.Fatal(err)
		}
	}

	// The one session: superuser (to load auto_explain), acting as producer or dispatcher.
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	var capturing bool
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if capturing && n.Severity == "LOG" && strings.HasPrefix(n.Message, "duration:") {
			notices = append(notices, n.Message)
		}
	}
	sess, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close(context.Background())
	exec := func(q string) {
		if _, err := sess.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}

	seq := 0
	run := func(n int, explain bool) planRun {
		r := planRun{n: n}
		exec(`SET ROLE outbox_producer`)
		start := time.Now()
		for from := 0; from < n; from += 100 {
			evs := make([]producer.Event, 0, 100)
			for i := from; i < min(n, from+100); i++ {
				seq++
				evs = append(evs, benchEvent("execution.attempt-eligibility.finalized@1", "1", seq))
			}
			if err := pgx.BeginFunc(ctx, sess, func(tx pgx.Tx) error {
				_, err := producer.AppendMany(ctx, tx, evs)
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		r.appendDur = time.Since(start)
		exec(`RESET ROLE`)
		exec(`SET ROLE outbox_dispatcher`)
		start = time.Now()
		for done := 0; done < n; {
			last := n-done <= 100
			if explain && last {
				exec(`RESET ROLE`)
				exec(`LOAD 'auto_explain'`)
				exec(`SET auto_explain.log_min_duration = 0`)
				exec(`SET auto_explain.log_nested_statements = on`)
				exec(`SET auto_explain.log_analyze = on`) // actual rows and loops of this one cycle
				exec(`SET auto_explain.log_triggers = on`)
				exec(`SET client_min_messages = log`)
				exec(`SET ROLE outbox_dispatcher`)
				capturing = true
			}
			cs, err := pgcall.ClaimDeliveries(ctx, sess, pgcall.ClaimParams{Worker: "plan-bench", Destinations: []string{benchDest},
				BatchSize: 100, Lease: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if len(cs) == 0 {
				b.Fatalf("backlog exhausted after %d of %d", done, n)
			}
			items := make([]pgcall.AckItem, len(cs))
			for i, c := range cs {
				ack, rc := benchReceipt(b, c)
				_, cand, err := testdb.Receipts(b).DigestCandidate(rc)
				if err != nil {
					b.Fatal(err)
				}
				items[i] = pgcall.AckItem{Fence: pgcall.Fence{Destination: c.Destination, EventID: c.EventID,
					AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}, Ack: ack, Receipt: rc, ReceiptDigestCandidate: string(cand)}
			}
			outs, err := pgcall.AckDeliveries(ctx, sess, items)
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range outs {
				if err := o.Err(); err != nil {
					b.Fatal(err)
				}
			}
			done += len(cs)
			if capturing {
				capturing = false
				exec(`RESET ROLE`)
				exec(`SET client_min_messages = notice`)
				exec(`SET auto_explain.log_min_duration = -1`)
				exec(`SET ROLE outbox_dispatcher`)
			}
		}
		r.dispatchDur = time.Since(start)
		exec(`RESET ROLE`)
		r.appendPer = float64(r.appendDur.Microseconds()) / float64(n)
		r.dispatchPer = float64(r.dispatchDur.Microseconds()) / float64(n)
		r.pathPer = r.appendPer + r.dispatchPer
		return r
	}

	b.ResetTimer()
	r1 := run(n1, false)
	r2 := run(n2, true)
	b.StopTimer()
	var analyzed int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = 'outbox'
		AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)`).Scan(&analyzed); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r1.dispatchPer, "run1_dispatch_µs/item")
	b.ReportMetric(r2.dispatchPer, "run2_dispatch_µs/item")
	b.ReportMetric(r2.dispatchPer/r1.dispatchPer, "dispatch_ratio_run2/run1")
	b.ReportMetric(r1.appendPer, "run1_append_µs/item")
	b.ReportMetric(r2.appendPer, "run2_append_µs/item")
	b.ReportMetric(r2.appendPer/r1.appendPer, "append_ratio_run2/run1")
	b.ReportMetric(r2.pathPer/r1.pathPer, "path_ratio_run2/run1")
	b.ReportMetric(float64(analyzed), "tables_analyzed")
	b.Logf("HP-3 %s: run 1 (%d events): append %.0f µs/item, dispatch %.0f µs/item; run 2 (%d events): append %.0f µs/item, dispatch %.0f µs/item; dispatch ratio %.2f, path ratio %.2f (limit 1.5); %d outbox tables analyzed by the end",
		b.Name(), r1.n, r1.appendPer, r1.dispatchPer, r2.n, r2.appendPer, r2.dispatchPer, r2.dispatchPer/r1.dispatchPer, r2.pathPer/r1.pathPer, analyzed)

	// The plans of run 2's last claim and ack: the nested statements that touch the deliveries.
	out := os.Getenv("PLAN_OUT")
	if out == "" {
		return
	}
	// distinct statements (the foreign-key checks left out), slowest first
	type plan struct {
		ms   float64
		text string
	}
	var plans []plan
	seen := map[string]bool{}
	for _, msg := range notices {
		i := strings.Index(msg, "Query Text:")
		if i < 0 || !strings.Contains(msg, "outbox_deliveries") || strings.Contains(msg, `FROM ONLY "outbox"`) {
			continue
		}
		q := msg[i:]
		if j := strings.Index(q, "\n"); j >= 0 {
			q = q[:j]
		}
		if seen[q] {
			continue
		}
		seen[q] = true
		ms, _ := strconv.ParseFloat(strings.Fields(strings.TrimPrefix(msg, "duration:"))[0], 64)
		plans = append(plans, plan{ms, msg})
	}
	sort.SliceStable(plans, func(i, j int) bool { return plans[i].ms > plans[j].ms })
	var w strings.Builder
	for k, p := range plans[:min(10, len(plans))] {
		lines := strings.Split(strings.TrimRight(p.text, "\n"), "\n")
		if len(lines) > 60 {
			lines = append(lines[:60], "  …")
		}
		fmt.Fprintf(&w, "PLAN %s run2 statement %d\n%s\nENDPLAN\n", b.Name(), k+1, strings.Join(lines, "\n"))
	}
	f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "SUMMARY %s run1_events=%d run2_events=%d run1_dispatch_us=%.0f run2_dispatch_us=%.0f run1_append_us=%.0f run2_append_us=%.0f dispatch_ratio=%.2f path_ratio=%.2f tables_analyzed=%d\n",
		b.Name(), r1.n, r2.n, r1.dispatchPer, r2.dispatchPer, r1.appendPer, r2.appendPer, r2.dispatchPer/r1.dispatchPer, r2.pathPer/r1.pathPer, analyzed)
	if _, err := f.WriteString(w.String()); err != nil {
		b.Fatal(err)
	}
}
