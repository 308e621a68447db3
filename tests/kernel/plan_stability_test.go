package kernel

// HP-3 (SPEC §12a): a statement inside PL/pgSQL must not fall into a generic plan made while a
// table was small or unanalyzed (seen: the open-deliveries partial index scanned by
// destination only, O(batch x backlog)). Measured by work, not time (timed assertions are not
// allowed in tests; bench/plan_stability_bench_test.go times the same path): one dispatcher
// session primes its plan cache on nearly empty, never analyzed tables (autovacuum off for the
// test database's tables, so no ANALYZE ever invalidates those plans), the tables then grow
// to a backlog of thousands, and one claim of 100 plus its ack in the same session must read
// O(batch) index entries and table rows (pg_stat_user_indexes.idx_tup_read,
// pg_stat_user_tables.seq_tup_read), not O(backlog).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/producer"
)

// hp3Reads is, per outbox relation and index, the tuples read so far (index entries fetched
// by index scans, rows read by sequential scans) once conns' pending counts are flushed.
func hp3Reads(t *testing.T, reader *pgx.Conn, conns ...*pgx.Conn) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	for _, c := range conns {
		if _, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reader.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		t.Fatal(err)
	}
	rows, err := reader.Query(ctx, `
		SELECT 'index ' || indexrelname, coalesce(idx_tup_read, 0) FROM pg_stat_user_indexes WHERE schemaname = 'outbox'
		UNION ALL
		SELECT 'seq scan ' || relname, coalesce(seq_tup_read, 0) FROM pg_stat_user_tables WHERE schemaname = 'outbox'`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// hp3Cycle claims up to n deliveries and acknowledges them all (Go-built receipts and digest
// candidates) on conn, switching it to outbox_dispatcher and back.
func hp3Cycle(t *testing.T, conn *pgx.Conn, n int) int {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `SET ROLE outbox_dispatcher`); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := conn.Exec(ctx, `RESET ROLE`); err != nil {
			t.Fatal(err)
		}
	}()
	cs, err := pgcall.ClaimDeliveries(ctx, conn, pgcall.ClaimParams{Worker: kernelfix.WorkerA, Destinations: []string{kernelfix.DestMetering},
		BatchSize: n, Lease: kernelfix.LongLease})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]pgcall.AckItem, len(cs))
	for i, c := range cs {
		items[i] = ackItem(t, c, true)
	}
	if len(items) > 0 {
		out, err := pgcall.AckDeliveries(ctx, conn, items)
		if err != nil {
			t.Fatal(err)
		}
		hpOutcomes(t, out, len(cs), "complete")
	}
	return len(cs)
}

// hp3Append appends n events on conn as outbox_producer in transactions of 500.
func hp3Append(t *testing.T, conn *pgx.Conn, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `SET ROLE outbox_producer`); err != nil {
		t.Fatal(err)
	}
	evs := hpEvents(prefix, n)
	for from := 0; from < n; from += 500 {
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := producer.AppendMany(ctx, tx, evs[from:min(n, from+500)])
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `RESET ROLE`); err != nil {
		t.Fatal(err)
	}
}

// HP-3: plans cached while the tables were empty and unanalyzed stay O(batch) after growth.
func TestPlanStabilityAfterGrowthFromEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kernelfix.Setup(t)
	// no ANALYZE, ever, in this database: the plans made on the empty tables stay cached
	if _, err := b.Admin.Exec(ctx, `DO $$DECLARE r regclass; BEGIN
		FOR r IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		          WHERE n.nspname = 'outbox' AND c.relkind IN ('r', 'p') LOOP
			EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', r);
		END LOOP; END$$`); err != nil {
		t.Fatal(err)
	}
	var analyzed int
	if err := b.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = 'outbox'
		AND relname IN ('outbox_events', 'outbox_deliveries') AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)`).Scan(&analyzed); err != nil {
		t.Fatal(err)
	}
	if analyzed != 0 {
		t.Fatalf("the fresh database's event or delivery table was analyzed already")
	}

	// One session for all of it (cached plans persist): prime on nearly empty tables, more than
	// the five custom plans after which PostgreSQL may settle on a generic plan.
	sess := testdb.Conn(t, b.Dsn, "")
	const batch = 100
	for i := 0; i < 8; i++ {
		hp3Append(t, sess, fmt.Sprintf("prime%d", i), 10)
		if got := hp3Cycle(t, sess, 10); got != 10 {
			t.Fatalf("priming cycle %d claimed %d", i, got)
		}
	}
	// Growth: a backlog of thousands of pending deliveries and thousands acknowledged.
	const backlog = 12000
	hp3Append(t, sess, "grow", backlog)
	for i := 0; i < 30; i++ { // acknowledged history too, through the same cached plans
		hp3Cycle(t, sess, batch)
	}

	// Every delivery claimed so far left an entry in the partial claimable index (status
	// 'pending' no longer holds for its new version) that stays until vacuum or an index scan
	// marks it dead, and an index scan can mark it dead only once no snapshot anywhere in the
	// cluster's horizon still sees the old version: on a loaded machine (CI: other tests' long
	// transactions) none of them is marked and the claim reads them all. That is a vacuum
	// matter, not a plan matter, so the claimable index is allowed those entries on top of the
	// O(batch) limit; a plan that scans the destination's pending backlog reads far more.
	var claimedBefore, pendingBefore int64
	if err := b.Admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'pending'), count(*) FILTER (WHERE status = 'pending')
		FROM outbox.outbox_deliveries WHERE destination = $1`, kernelfix.DestMetering).Scan(&claimedBefore, &pendingBefore); err != nil {
		t.Fatal(err)
	}
	before := hp3Reads(t, b.Admin, sess)
	if got := hp3Cycle(t, sess, batch); got != batch {
		t.Fatalf("claimed %d, want %d", got, batch)
	}
	after := hp3Reads(t, b.Admin, sess)
	var total int64
	var lines []string
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			total += d
			lines = append(lines, fmt.Sprintf("%s: %d", name, d))
		}
	}
	sort.Strings(lines)
	t.Logf("one claim+ack of %d over a backlog of %d pending (tables never analyzed): %d tuples read\n  %s",
		batch, backlog-30*batch, total, strings.Join(lines, "\n  "))
	const limit = 20 * batch
	if pendingBefore <= limit+claimedBefore {
		t.Fatalf("backlog too small to tell O(backlog) from O(batch): %d pending, %d claimed before", pendingBefore, claimedBefore)
	}
	var over []string
	for name, n := range after {
		allowed := int64(limit)
		if name == "index outbox_deliveries_claimable" {
			allowed += claimedBefore
		}
		if d := n - before[name]; d > allowed {
			over = append(over, fmt.Sprintf("%s: %d (allowed %d)", name, d, allowed))
		}
	}
	sort.Strings(over)
	if len(over) > 0 || total > 3*limit+claimedBefore {
		t.Errorf("HP-3: one claim+ack of %d after growth from empty read O(backlog), not O(batch) (limit %d per index or table, %d in all, plus %d entries of claimed deliveries in the claimable index; read %d):\n  %s",
			batch, limit, 3*limit, claimedBefore, total, strings.Join(over, "\n  "))
	}
}
