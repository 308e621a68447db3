package consumer

import (
	"context"
	"sync"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

func ckObserve(t *testing.T, db pgcall.DBTX, consumer, aggregate string, rev int64) string {
	t.Helper()
	o, err := pgcall.ObserveRevision(context.Background(), db, pgcall.ObserveRevisionParams{
		ConsumerName: consumer, ProjectionName: "operations_timeline", ProjectionVersion: 1,
		AggregateID: aggregate, AggregateRevision: rev})
	if err != nil {
		t.Fatalf("observe %s@%d: %v", aggregate, rev, err)
	}
	return o
}

// R-CO-3: apply / duplicate / gap. A gap writes the gap row and nothing else (progress
// unchanged); later observations beyond the same gap update it; the missing revision applies
// and closes it (kept, with closed_by_revision); a second gap gets its own row.
func TestInboxObserveRevision(t *testing.T) {
	t.Parallel()
	dsn := testdb.URL(t)
	conn := testdb.Conn(t, dsn, "outbox_consumer")
	consumerfix.RegisterProjectionVersion(t, testdb.Conn(t, dsn, "outbox_registrar"), "operations_timeline", 1) // R-PV-1
	admin := testdb.Conn(t, dsn, "")
	const c, agg = "operations_projector", "run-1"
	progress := func() int {
		return consumerfix.Count(t, admin, `SELECT coalesce(max(last_revision), 0) FROM inbox.inbox_revision_progress
			WHERE consumer_name = $1 AND aggregate_id = $2`, c, agg)
	}
	steps := []struct {
		rev      int64
		want     string
		progress int
	}{
		{3, "gap", 0}, // no progress row yet: expected 1
		{1, "apply", 1},
		{1, "duplicate", 1},
		{4, "gap", 1},
		{3, "gap", 1},
		{2, "apply", 2},
		{5, "gap", 2},
		{3, "apply", 3},
		{4, "apply", 4},
		{2, "duplicate", 4},
	}
	for i, s := range steps {
		if got := ckObserve(t, conn, c, agg, s.rev); got != s.want {
			t.Fatalf("step %d: revision %d → %s, want %s", i, s.rev, got, s.want)
		}
		if p := progress(); p != s.progress {
			t.Fatalf("step %d: progress %d, want %d", i, p, s.progress)
		}
	}
	type gap struct {
		expected, seen, closedBy int64
		count                    int
	}
	rows, err := admin.Query(context.Background(), `SELECT expected_revision, seen_revision, coalesce(closed_by_revision, 0), observation_count
		FROM inbox.inbox_revision_gaps WHERE consumer_name = $1 AND aggregate_id = $2 ORDER BY expected_revision`, c, agg)
	if err != nil {
		t.Fatal(err)
	}
	var gaps []gap
	for rows.Next() {
		var g gap
		if err := rows.Scan(&g.expected, &g.seen, &g.closedBy, &g.count); err != nil {
			t.Fatal(err)
		}
		gaps = append(gaps, g)
	}
	want := []gap{{1, 3, 1, 1}, {2, 4, 2, 2}, {3, 5, 3, 1}}
	if len(gaps) != len(want) {
		t.Fatalf("gaps = %+v, want %+v", gaps, want)
	}
	for i := range want {
		if gaps[i] != want[i] {
			t.Fatalf("gap %d = %+v, want %+v", i, gaps[i], want[i])
		}
	}
	// Another projection version and another consumer have their own progress.
	if got := ckObserve(t, conn, "other_consumer", agg, 1); got != "apply" {
		t.Fatalf("other consumer: %s", got)
	}
	if consumerfix.Count(t, admin, `SELECT count(*) FROM inbox.inbox_revision_gaps WHERE closed_at IS NULL`) != 0 {
		t.Fatal("open gaps remain")
	}
	// Arguments.
	for _, bad := range []pgcall.ObserveRevisionParams{
		{ConsumerName: c, AggregateID: "", AggregateRevision: 1},
		{ConsumerName: c, AggregateID: agg, AggregateRevision: 0},
	} {
		if _, err := pgcall.ObserveRevision(context.Background(), conn, bad); consumerfix.SQLState(err) != "OB105" {
			t.Errorf("%+v: %v, want OB105", bad, err)
		}
	}
	if _, err := pgcall.ObserveRevision(context.Background(), conn, pgcall.ObserveRevisionParams{
		ConsumerName: c, ProjectionName: "p", ProjectionVersion: 0, AggregateID: agg, AggregateRevision: 1}); consumerfix.SQLState(err) != "22023" {
		t.Errorf("projection without version: %v, want 22023", err)
	}
}

// R-CO-3 (concurrency): two transactions observe revision 1 of a new aggregate at once. The
// second waits (advisory lock standing in for the missing progress row) and, after the first
// commits, answers duplicate; after a rollback of the first it would apply. Then with a
// progress row: the row lock serialises the same way.
func TestInboxObserveRevisionConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	a := testdb.Conn(t, dsn, "outbox_consumer")
	b := testdb.Conn(t, dsn, "outbox_consumer")
	consumerfix.RegisterProjectionVersion(t, testdb.Conn(t, dsn, "outbox_registrar"), "operations_timeline", 1) // R-PV-1
	admin := testdb.Conn(t, dsn, "")
	var bPID int
	if err := b.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&bPID); err != nil {
		t.Fatal(err)
	}
	race := func(rev int64, commitA bool) (string, string) {
		txA, err := a.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ra := ckObserve(t, txA, "operations_projector", "agg", rev)
		var rb string
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := pgcall.ObserveRevision(ctx, b, pgcall.ObserveRevisionParams{ConsumerName: "operations_projector",
				ProjectionName: "operations_timeline", ProjectionVersion: 1, AggregateID: "agg", AggregateRevision: rev})
			if err != nil {
				t.Error(err)
			}
			rb = o
		}()
		ckWaitBlocked(t, admin, bPID)
		if commitA {
			err = txA.Commit(ctx)
		} else {
			err = txA.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		return ra, rb
	}
	if ra, rb := race(1, false); ra != "apply" || rb != "apply" { // A rolled back: B applies 1
		t.Fatalf("rollback race: A %s, B %s; want apply, apply", ra, rb)
	}
	if ra, rb := race(2, true); ra != "apply" || rb != "duplicate" { // row lock path
		t.Fatalf("commit race: A %s, B %s; want apply, duplicate", ra, rb)
	}
	if p := consumerfix.Count(t, admin, `SELECT last_revision FROM inbox.inbox_revision_progress WHERE aggregate_id = 'agg'`); p != 2 {
		t.Fatalf("progress %d, want 2", p)
	}
}
