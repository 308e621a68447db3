package kernel

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/producer"
)

// xactTuplesRead is the number of table rows the current transaction has read in schema outbox
// so far: sequential-scan rows plus rows fetched by index scans (pg_stat_xact_user_tables, the
// backend's own not yet flushed counters of this transaction).
func xactTuplesRead(t *testing.T, tx pgx.Tx) int64 {
	t.Helper()
	var n int64
	if err := tx.QueryRow(context.Background(), `SELECT COALESCE(sum(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0)::bigint
		FROM pg_stat_xact_user_tables WHERE schemaname = 'outbox'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var sharedBuffers = regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?(?: dirtied=(\d+))?(?: written=(\d+))?`)

// appendCost appends one event (outbox.append_event on the D-2 hot path, as producer.Append
// sends it) inside tx under EXPLAIN (ANALYZE, BUFFERS) and returns the outbox rows it read and
// the shared buffers it touched (hit + read; the top node's count includes the function's
// statements and their triggers).
func appendCost(t *testing.T, tx pgx.Tx, ev producer.Event) (tuples, buffers int64) {
	t.Helper()
	ctx := context.Background()
	doc, _, err := producer.Envelope(ev)
	if err != nil {
		t.Fatal(err)
	}
	before := xactTuplesRead(t, tx)
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF)
		SELECT * FROM outbox.append_event($1::json)`, string(doc))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var line string
	if _, err := pgx.ForEachRow(rows, []any{&line}, func() error { lines = append(lines, line); return nil }); err != nil {
		t.Fatalf("explain append: %v", err)
	}
	tuples = xactTuplesRead(t, tx) - before
	for _, l := range lines {
		if m := sharedBuffers.FindStringSubmatch(l); m != nil {
			hit, _ := strconv.ParseInt(m[1], 10, 64)
			read, _ := strconv.ParseInt("0"+m[2], 10, 64)
			return tuples, hit + read
		}
	}
	t.Fatalf("no buffer counts in the plan: %v", lines)
	return 0, 0
}

// Issue 35 item 6, HP-1, R-AP-5: the work of an append does not grow with what its transaction
// appended before. In one producer transaction of 5,000 single append_event calls, the outbox
// rows read and the buffers touched by append 5,000 equal those of append 100 within a small
// constant (the old recording triggers read every proof row of the transaction: about 2 rows per
// earlier append), and COMMIT's deferred delivery-set proof fires once for the whole transaction
// (it fired once per INSERT statement, each firing probing the rows the first one had deleted).
func TestAppendCostFlatInTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	tx, err := b.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range []string{"SET LOCAL track_functions = 'all'", "SET LOCAL ROLE outbox_producer"} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	event := func(i int) producer.Event {
		ev := sampleEvent()
		ev.AggregateID = fmt.Sprintf("flat-%d", i) // a new aggregate each: no parked chains
		return ev
	}
	const early, late = 100, 5000
	var tEarly, bEarly, tLate, bLate int64
	for i := 1; i <= late; i++ {
		switch i {
		case early:
			tEarly, bEarly = appendCost(t, tx, event(i))
		case late:
			tLate, bLate = appendCost(t, tx, event(i))
		default:
			if _, err := producer.Append(ctx, tx, event(i)); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
	}
	t.Logf("append %d: %d outbox rows read, %d buffers; append %d: %d rows, %d buffers", early, tEarly, bEarly, late, tLate, bLate)
	if tLate > tEarly+4 {
		t.Fatalf("append %d read %d outbox rows, append %d read %d: the cost of an append grows with the transaction", late, tLate, early, tEarly)
	}
	if bLate > bEarly+24 {
		t.Fatalf("append %d touched %d buffers, append %d touched %d: the cost of an append grows with the transaction", late, bLate, early, bEarly)
	}
	before := xactCalls(t, tx)
	if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL IMMEDIATE"); err != nil {
		t.Fatalf("delivery-set proof: %v", err)
	}
	proofs := xactCalls(t, tx)["outbox.tg_outbox_append_proofs__check"] - before["outbox.tg_outbox_append_proofs__check"]
	if proofs != 1 {
		t.Fatalf("the deferred delivery-set proof fired %d times for %d appends, want once", proofs, late)
	}
	if _, err := tx.Exec(ctx, "RESET ROLE"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if e, d := totalEventsAndDeliveries(t, b.admin); e != late || d != late {
		t.Fatalf("%d events, %d deliveries committed, want %d each", e, d, late)
	}
}

// R-AP-5 with the proof queued by a transaction's first recording row only: the proof still
// covers every statement when that first row was rolled back with its savepoint, and when
// SET CONSTRAINTS ... IMMEDIATE already proved the rows before (the next statement queues it
// again). An extra delivery (not a member of the event's frozen set) fails with OB104.
func TestAppendProofQueuedAfterSavepointAndImmediate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := appendSetup(t)
	extra := `INSERT INTO outbox.outbox_deliveries (destination, event_id, delivery_set_version, consumer_name,
		expected_receipt_type, expected_receipt_schema_version, mandatory, aggregate_id, aggregate_revision)
		VALUES ('metering_input_processor', $1, 1, 'metering_input_processor_consumer',
		'MeteringInputProcessorConsumerReceipt', 1, true, $2, 1)`
	for _, tc := range []struct {
		name   string
		before []string // statements between the first append and the second one
	}{
		{"first row rolled back", nil},
		{"proved immediately before", []string{"SET CONSTRAINTS ALL IMMEDIATE", "SET CONSTRAINTS ALL DEFERRED"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := b.admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			ev := sampleEvent()
			ev.AggregateID = "sp-" + tc.name
			if tc.before == nil {
				sp, err := tx.Begin(ctx) // SAVEPOINT
				if err != nil {
					t.Fatal(err)
				}
				first := sampleEvent()
				first.AggregateID = "sp-rolled-back"
				if _, err := producer.Append(ctx, sp, first); err != nil {
					t.Fatal(err)
				}
				if err := sp.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				first := sampleEvent()
				first.AggregateID = "sp-proved-" + tc.name
				if _, err := producer.Append(ctx, tx, first); err != nil {
					t.Fatal(err)
				}
				for _, s := range tc.before {
					if _, err := tx.Exec(ctx, s); err != nil {
						t.Fatalf("%s: %v", s, err)
					}
				}
			}
			r, err := producer.Append(ctx, tx, ev)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, extra, r.EventID, ev.AggregateID); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); !errors.Is(pgcallErr(err), pgcall.ErrDeliverySetIncomplete) {
				t.Fatalf("commit: %v, want OB104", err)
			}
			if e, d := totalEventsAndDeliveries(t, b.admin); e != 0 || d != 0 {
				t.Fatalf("%d events, %d deliveries after the failed commit", e, d)
			}
		})
	}
}
