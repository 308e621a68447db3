package kernelfix

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// StatsSession: a superuser connection with track_functions = 'all' (a superuser setting) that
// then acts as role, and a superuser connection that reads the statistics.
func StatsSession(t *testing.T, dsn, role string) *pgx.Conn {
	t.Helper()
	c := testdb.Conn(t, dsn, "")
	for _, q := range []string{`SET track_functions = 'all'`, "SET ROLE " + pgx.Identifier{role}.Sanitize()} {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return c
}

// FunctionCalls is the call count of every user function of the database, as the statistics
// have them once conn's pending counts are flushed (reader: another connection).
func FunctionCalls(t *testing.T, conn, reader *pgx.Conn, others ...*pgx.Conn) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	// Every connection of the test flushes its pending counts first: the cluster tracks all
	// function calls, and a fixture call left pending (a backend flushes at most once a second,
	// and only 10 s later when idle) would otherwise land inside the measured window.
	FlushStats(t, append([]*pgx.Conn{conn, reader}, others...)...)
	if _, err := reader.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		t.Fatal(err)
	}
	rows, err := reader.Query(ctx, `SELECT schemaname || '.' || funcname, sum(calls)::bigint
	                                  FROM pg_stat_user_functions GROUP BY 1`)
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

// FlushStats makes each connection flush its pending statistics (before its next ReadyForQuery).
func FlushStats(t *testing.T, conns ...*pgx.Conn) {
	t.Helper()
	for _, c := range conns {
		if _, err := c.Exec(context.Background(), `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(context.Background(), `SELECT 1`); err != nil { // a second round trip: the flush has happened
			t.Fatal(err)
		}
	}
}

// CountCalls runs op (its own transaction, committed, so deferred triggers are counted) on conn
// and returns the calls it made per function (others: the test's other live connections, whose
// pending counts are flushed before each reading).
func CountCalls(t *testing.T, conn, reader *pgx.Conn, op func(tx pgx.Tx) error, others ...*pgx.Conn) map[string]int64 {
	t.Helper()
	before := FunctionCalls(t, conn, reader, others...)
	if err := pgx.BeginFunc(context.Background(), conn, op); err != nil {
		t.Fatal(err)
	}
	after := FunctionCalls(t, conn, reader, others...)
	d := map[string]int64{}
	for name, n := range after {
		if n -= before[name]; n != 0 {
			d[name] = n
		}
	}
	return d
}
