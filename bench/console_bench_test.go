//go:build bench

package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// BenchmarkConsoleLists (issue 25 item 2): the operator console's list queries on CONSOLE_N
// deliveries (default 1,000,000: 250,000 events x the 4 reference destinations; 90 %
// acknowledged, 5 % pending, 3 % leased, 2 % quarantined, spread over time). The rows are
// written in bulk by a superuser with triggers off (the console's cost depends on the rows, not
// on how they got there), then VACUUM ANALYZE. Timed: a first page and a deep page (cursor
// after the middle row) of each state, and the bounded counts of one destination, through the
// real wrappers as outbox_auditor. Each function's inner statement is captured with
// auto_explain (nested statements, ANALYZE) and the benchmark FAILS when a list or count
// statement reads outbox_deliveries with a sequential scan or with any index but
// outbox_deliveries_console, the index it is built for - the EXPLAIN check of "index-backed at 10^6". Reported:
// µs per first page, per deep page, per count call. b.N is ignored (fixed work: CONSOLE_REPS
// repetitions, default 20, of each call).
func BenchmarkConsoleLists(b *testing.B) {
	n := 1000000
	if s := os.Getenv("CONSOLE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	reps := 20
	if s := os.Getenv("CONSOLE_REPS"); s != "" {
		reps, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	dsn, admin, total := consoleFixture(b, n)
	// One session as the superuser (to load auto_explain) acting as outbox_auditor.
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "Query Text") || strings.Contains(n.Message, "duration:") {
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
	for _, q := range []string{`LOAD 'auto_explain'`, `SET ROLE outbox_auditor`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	explain := func(on bool) {
		// auto_explain's settings are superuser-only: set them outside the auditor role
		qs := []string{`RESET ROLE`, `SET auto_explain.log_min_duration = -1`, `SET client_min_messages = notice`, `SET ROLE outbox_auditor`}
		if on {
			qs = []string{`RESET ROLE`, `SET auto_explain.log_min_duration = 0`, `SET auto_explain.log_nested_statements = on`,
				`SET auto_explain.log_analyze = on`, `SET auto_explain.log_buffers = on`, `SET client_min_messages = log`, `SET ROLE outbox_auditor`}
		}
		for _, q := range qs {
			if _, err := conn.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	const dest = "metering_input_processor"
	// checkPlan: the nested statement that reads outbox_deliveries must use the wanted index.
	checkPlan := func(what, wantIndex string) {
		mu.Lock()
		defer mu.Unlock()
		var nested []string
		for _, p := range plans {
			if strings.Contains(p, "outbox_deliveries") && !strings.Contains(p, "Function Scan") {
				nested = append(nested, p)
			}
		}
		plans = nil
		if len(nested) == 0 {
			b.Fatalf("%s: auto_explain logged no plan of the inner statement", what)
		}
		for _, p := range nested {
			if strings.Contains(p, "Seq Scan on outbox_deliveries") || !strings.Contains(p, wantIndex) || strings.Contains(p, "OFFSET") {
				b.Fatalf("%s: the statement does not read outbox_deliveries through %s:\n%s", what, wantIndex, p)
			}
		}
		b.Logf("%s plan:\n%s", what, nested[len(nested)-1])
	}
	indexOf := map[string]string{"pending": "outbox_deliveries_console", "leased": "outbox_deliveries_console",
		"quarantined": "outbox_deliveries_console", "acknowledged": "outbox_deliveries_console"}

	b.ResetTimer()
	var firstTotal, deepTotal time.Duration
	calls := 0
	for _, state := range []string{"pending", "leased", "quarantined", "acknowledged"} {
		// the cursor of the middle row: a deep page (what OFFSET would make expensive)
		var mid pgcall.ConsoleCursor
		if err := admin.QueryRow(ctx, `SELECT created_at, event_id::text FROM outbox.outbox_deliveries
			WHERE destination = $1 AND status = $2 ORDER BY created_at, event_id
			OFFSET (SELECT count(*) / 2 FROM outbox.outbox_deliveries WHERE destination = $1 AND status = $2) LIMIT 1`,
			dest, state).Scan(&mid.CreatedAt, &mid.EventID); err != nil {
			b.Fatal(err)
		}
		for _, page := range []struct {
			name  string
			after pgcall.ConsoleCursor
			acc   *time.Duration
		}{{"first", pgcall.ConsoleCursor{}, &firstTotal}, {"deep", mid, &deepTotal}} {
			explain(true)
			if items, err := pgcall.ConsoleDeliveries(ctx, conn, pgcall.ConsoleListParams{Destination: dest, Status: state,
				After: page.after, Limit: 51}); err != nil || len(items) != 51 {
				b.Fatalf("%s %s page: %d rows, %v", state, page.name, len(items), err)
			}
			explain(false)
			checkPlan(state+" "+page.name+" page", indexOf[state])
			start := time.Now()
			for i := 0; i < reps; i++ {
				if _, err := pgcall.ConsoleDeliveries(ctx, conn, pgcall.ConsoleListParams{Destination: dest, Status: state,
					After: page.after, Limit: 51}); err != nil {
					b.Fatal(err)
				}
			}
			*page.acc += time.Since(start)
		}
		calls += reps
	}
	explain(true)
	if _, err := pgcall.ConsoleDeliveryCounts(ctx, conn, dest, 10000); err != nil {
		b.Fatal(err)
	}
	explain(false)
	mu.Lock()
	var countPlan string
	for _, p := range plans {
		if strings.Contains(p, "outbox_deliveries") && strings.Contains(p, "LIMIT") {
			countPlan = p
		}
	}
	plans = nil
	mu.Unlock()
	if strings.Contains(countPlan, "Seq Scan on outbox_deliveries") || !strings.Contains(countPlan, "Index Only Scan") {
		b.Fatalf("counts do not use index-only scans:\n%s", countPlan)
	}
	b.Logf("counts plan:\n%s", countPlan)
	start := time.Now()
	for i := 0; i < reps; i++ {
		if _, err := pgcall.ConsoleDeliveryCounts(ctx, conn, dest, 10000); err != nil {
			b.Fatal(err)
		}
	}
	countTime := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(total), "deliveries")
	b.ReportMetric(float64(firstTotal.Microseconds())/float64(calls), "µs/first-page")
	b.ReportMetric(float64(deepTotal.Microseconds())/float64(calls), "µs/deep-page")
	b.ReportMetric(float64(countTime.Microseconds())/float64(reps), "µs/counts")
	b.ReportMetric(0, "ns/op")
}

// consoleFixture builds the console benchmarks' database: n deliveries (n/4 events x the 4
// reference destinations; 90 % acknowledged, 5 % pending, 3 % leased, 2 % quarantined, one event
// a second back from now), each event with a correlation id shared by 4 events and an operation
// id shared by 8, and one finished attempt per quarantined delivery (consumer_rejected) and per
// acknowledged metering delivery. Written in bulk by a superuser with triggers off, then VACUUM
// ANALYZE.
func consoleFixture(b *testing.B, n int) (dsn string, admin *pgx.Conn, total int) {
	b.Helper()
	ctx := context.Background()
	dsn = testdb.URL(b)
	admin = testdb.Conn(b, dsn, "")
	testfix.ActivateReference(b, admin)
	events := n / 4
	tx, err := admin.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{`SET LOCAL session_replication_role = replica`,
		`INSERT INTO outbox.outbox_events (event_id, event_type, schema_version, delivery_set_version,
		        delivery_set_definition_schema_version, delivery_set_definition_digest_algorithm_version,
		        delivery_set_definition_digest, aggregate_id, aggregate_revision, tenant_kind, tenant_id, workspace_id,
		        event_payload, event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, created_at,
		        correlation_id, operation_id)
		 SELECT gen_random_uuid(), 'execution.attempt-eligibility.finalized@1', '1', v.delivery_set_version,
		        v.definition_schema_version, v.digest_algorithm_version, v.definition_digest, 'agg-' || i, 1,
		        'workspace', 't', 'w', '{}'::jsonb, 'jcs-sha256-v1', repeat('a', 64),
		        now() - make_interval(secs => ($1::int - i)), now() - make_interval(secs => ($1::int - i)),
		        'corr-' || (i / 4), 'op-' || (i / 8)
		   FROM generate_series(1, $1::int) AS i,
		        (SELECT * FROM outbox.delivery_set_versions ORDER BY delivery_set_version DESC LIMIT 1) AS v`,
		`INSERT INTO outbox.outbox_deliveries (destination, event_id, delivery_set_version, consumer_name,
		        expected_receipt_type, expected_receipt_schema_version, mandatory, aggregate_id, aggregate_revision,
		        status, available_at, created_at, lease_owner, lease_token, lease_expires_at, attempt_count,
		        delivered_at, ack_receipt_digest)
		 SELECT dd.destination, e.event_id, e.delivery_set_version, dd.consumer_name, 'bench', 1, true,
		        e.aggregate_id, 1, s.status, e.created_at, e.created_at,
		        CASE WHEN s.status = 'leased' THEN 'bench-worker' END,
		        CASE WHEN s.status = 'leased' THEN gen_random_uuid() END,
		        CASE WHEN s.status = 'leased' THEN now() + interval '1 hour' END,
		        CASE WHEN s.status = 'pending' THEN 0 ELSE 1 END,
		        CASE WHEN s.status = 'acknowledged' THEN e.created_at END,
		        CASE WHEN s.status = 'acknowledged' THEN repeat('b', 64) END
		   FROM outbox.outbox_events AS e
		  CROSS JOIN outbox.delivery_destinations AS dd
		  CROSS JOIN LATERAL (SELECT CASE WHEN r < 90 THEN 'acknowledged' WHEN r < 95 THEN 'pending'
		                                  WHEN r < 98 THEN 'leased' ELSE 'quarantined' END AS status
		                        FROM (SELECT (hashtext(e.event_id::text || dd.destination) & 1023) % 100 AS r) AS x) AS s
		  WHERE dd.destination IN ('metering_input_processor', 'billing_finalization_coordinator',
		                           'billing_settlement_catch_up', 'core_operations')`,
		// the attempt history of the console's search by error code: one finished attempt per
		// quarantined delivery (consumer_rejected) and per acknowledged metering delivery (no code)
		`INSERT INTO outbox.outbox_delivery_attempt_starts (attempt_id, destination, event_id, attempt_number, lease_token, worker, started_at)
		 SELECT gen_random_uuid(), d.destination, d.event_id, 1, gen_random_uuid(), 'bench-worker', d.created_at
		   FROM outbox.outbox_deliveries AS d
		  WHERE d.status = 'quarantined' OR (d.status = 'acknowledged' AND d.destination = 'metering_input_processor')`,
		`INSERT INTO outbox.outbox_delivery_attempt_finishes (attempt_id, finished_at, outcome, retry_disposition, normalized_error_code)
		 SELECT s.attempt_id, s.started_at + interval '1 second',
		        CASE WHEN d.status = 'quarantined' THEN 'non_retryable' ELSE 'acknowledged' END,
		        CASE WHEN d.status = 'quarantined' THEN 'quarantined' ELSE 'none' END,
		        CASE WHEN d.status = 'quarantined' THEN 'consumer_rejected' END
		   FROM outbox.outbox_delivery_attempt_starts AS s
		   JOIN outbox.outbox_deliveries AS d ON d.destination = s.destination AND d.event_id = s.event_id`} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{events}
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `VACUUM ANALYZE outbox.outbox_events, outbox.outbox_deliveries, outbox.outbox_delivery_attempt_starts, outbox.outbox_delivery_attempt_finishes`); err != nil {
		b.Fatal(err)
	}
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM outbox.outbox_deliveries`).Scan(&total); err != nil {
		b.Fatal(err)
	}
	return dsn, admin, total

}
