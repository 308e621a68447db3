//go:build bench

package bench

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// BenchmarkConsoleSearch (issue 41 item 3): the console's search (outbox.console_search) and
// live overview (outbox.console_destinations) on the BenchmarkConsoleLists database (CONSOLE_N
// deliveries, default 1,000,000). For every search kind the inner statement is captured with
// auto_explain (nested statements, ANALYZE) and the benchmark FAILS unless it reads the index it
// is built for and no sequential scan of outbox_events, outbox_deliveries or the attempt finishes
// appears: eventId outbox_events_pkey; aggregateId, correlationId, operationId, eventType the
// outbox_events_console_* indexes; destination outbox_deliveries_console (four state ranges
// merged); errorCode outbox_delivery_attempt_finishes_console_error; timeRange (one hour) the BRIN
// index outbox_events_created_brin. Reported: µs per first page (51 rows) of each kind and per
// overview call, as outbox_auditor through the Go wrappers. b.N is ignored (CONSOLE_REPS
// repetitions, default 20).
func BenchmarkConsoleSearch(b *testing.B) {
	n, reps := envInt("CONSOLE_N", 1000000), envInt("CONSOLE_REPS", 20)
	ctx := context.Background()
	dsn, admin, total := consoleFixture(b, n)
	var eventID, aggregate, corr, op string
	var mid time.Time
	if err := admin.QueryRow(ctx, `SELECT event_id::text, aggregate_id, correlation_id, operation_id, created_at
		FROM outbox.outbox_events ORDER BY created_at OFFSET (SELECT count(*) / 2 FROM outbox.outbox_events) LIMIT 1`).
		Scan(&eventID, &aggregate, &corr, &op, &mid); err != nil {
		b.Fatal(err)
	}

	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "Query Text") {
			mu.Lock()
			plans = append(plans, n.Message)
			mu.Unlock()
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	set := func(qs ...string) {
		for _, q := range qs {
			if _, err := conn.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	set(`LOAD 'auto_explain'`, `SET ROLE outbox_auditor`)
	explain := func(on bool) {
		if on {
			set(`RESET ROLE`, `SET auto_explain.log_min_duration = 0`, `SET auto_explain.log_nested_statements = on`,
				`SET auto_explain.log_analyze = on`, `SET client_min_messages = log`, `SET ROLE outbox_auditor`)
			return
		}
		set(`RESET ROLE`, `SET auto_explain.log_min_duration = -1`, `SET client_min_messages = notice`, `SET ROLE outbox_auditor`)
	}
	// inner: the captured plans of statements that read a kernel table (not the wrapper's own
	// SELECT ... FROM outbox.console_search(...), a Function Scan)
	inner := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, p := range plans {
			if !strings.Contains(p, "Function Scan") && (strings.Contains(p, "outbox_events") || strings.Contains(p, "outbox_deliveries") ||
				strings.Contains(p, "attempt_finishes")) {
				out = append(out, p)
			}
		}
		plans = nil
		return out
	}
	from, to := mid.Add(-30*time.Minute), mid.Add(30*time.Minute)
	kinds := []struct {
		kind, value, index string
		from, to           *time.Time
	}{
		{"eventId", eventID, "outbox_events_pkey", nil, nil},
		{"aggregateId", aggregate, "outbox_events_console_aggregate", nil, nil},
		{"correlationId", corr, "outbox_events_console_correlation", nil, nil},
		{"operationId", op, "outbox_events_console_operation", nil, nil},
		{"eventType", "execution.attempt-eligibility.finalized@1", "outbox_events_console_type", nil, nil},
		{"eventType", "execution.attempt-eligibility.finalized@1", "outbox_events_console_type", &from, &to},
		{"destination", "metering_input_processor", "outbox_deliveries_console", nil, nil},
		{"errorCode", "consumer_rejected", "outbox_delivery_attempt_finishes_console_error", nil, nil},
		{"timeRange", "", "outbox_events_created_brin", &from, &to},
	}
	b.ResetTimer()
	for _, k := range kinds {
		p := pgcall.ConsoleSearchParams{Kind: k.kind, Value: k.value, From: k.from, To: k.to, Limit: 51}
		explain(true)
		hits, err := pgcall.ConsoleSearch(ctx, conn, p)
		explain(false)
		if err != nil || len(hits) == 0 {
			b.Fatalf("%s: %d hits, %v", k.kind, len(hits), err)
		}
		ps := inner()
		if len(ps) == 0 {
			b.Fatalf("%s: auto_explain logged no inner plan", k.kind)
		}
		last := ps[len(ps)-1]
		if strings.Contains(last, "Seq Scan") || !strings.Contains(last, k.index) {
			b.Fatalf("%s: the statement does not read through %s (or scans sequentially):\n%s", k.kind, k.index, last)
		}
		b.Logf("%s plan:\n%s", k.kind, last)
		start := time.Now()
		for i := 0; i < reps; i++ {
			if _, err := pgcall.ConsoleSearch(ctx, conn, p); err != nil {
				b.Fatal(err)
			}
		}
		name := k.kind
		if k.kind == "eventType" && k.from != nil {
			name = "eventTypeInHour"
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(reps), "µs/"+name)
	}
	explain(true)
	if _, err := pgcall.ConsoleDestinations(ctx, conn, 10000); err != nil {
		b.Fatal(err)
	}
	explain(false)
	for _, p := range inner() {
		if strings.Contains(p, "Seq Scan on outbox_deliveries") {
			b.Fatalf("console_destinations scans the deliveries:\n%s", p)
		}
		b.Logf("console_destinations plan:\n%s", p)
	}
	start := time.Now()
	for i := 0; i < reps; i++ {
		if _, err := pgcall.ConsoleDestinations(ctx, conn, 10000); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(reps), "µs/overview-destinations")
	b.StopTimer()
	b.ReportMetric(float64(total), "deliveries")
	b.ReportMetric(0, "ns/op")
}
