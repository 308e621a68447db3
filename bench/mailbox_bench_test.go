//go:build bench

package bench

// BenchmarkMailboxPump measures the mailbox pipeline end to end (SPEC §10, issue 10): b.N
// messages pre-committed in a legacy mailbox table of another database (16 keys round-robin,
// ~100-byte messages); the pump discovers them (record_discovery, batches of 500), processes
// each head in its own transaction (claim_head; reference handler: apply_reference_effect +
// append_event on the D-2 hot path + complete_head) and writes the processed marks back
// (batched UPDATE in the mailbox + record_backfill). Reported: messages/s end to end (all
// processed AND marked), the wall time per message of each phase, and the database self time
// per message of the costliest functions and the total time of the API calls (track_functions =
// 'pl', pg_stat_user_functions).
//
//	go test -tags bench -run '^$' -bench MailboxPump -benchtime 5000x ./bench/

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/peterldowns/pgtestdb"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/mailbox/pump"
	"github.com/oceanway/pgoutbox/reference"
)

type benchBoxMigrator struct{}

func (benchBoxMigrator) Hash() (string, error) { return "bench-legacy-mailbox-v1", nil }
func (benchBoxMigrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE mailbox (msg_id bigint PRIMARY KEY, received_at timestamptz,
		message jsonb NOT NULL, processed_at timestamptz)`)
	return err
}

func BenchmarkMailboxPump(b *testing.B) {
	ctx := context.Background()
	ourDSN := testdb.URL(b)
	boxDSN := pgtestdb.Custom(b, testdb.Config(b), benchBoxMigrator{}).URL()
	admin := testdb.Conn(b, ourDSN, "")
	box := testdb.Conn(b, boxDSN, "")
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	_, err := admin.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outbox_bench_mailbox_pump') THEN
			CREATE ROLE outbox_bench_mailbox_pump NOLOGIN; END IF;
		GRANT outbox_mailbox, outbox_producer TO outbox_bench_mailbox_pump;
		EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`)
	must(err)
	_, err = admin.Exec(ctx, `SET ROLE outbox_registrar`)
	must(err)
	must(pgcall.RegisterMailboxSource(ctx, admin, pgcall.MailboxSourceParams{Source: "bench", HoleReleaseAfter: time.Hour, BackfillDeadline: time.Hour}))
	must(reference.RegisterMailboxDestination(ctx, admin))
	ref, err := reference.LoadRelease()
	must(err)
	doc, err := reference.ExtendReleaseWithMailbox(ref, 2)
	must(err)
	q, err := pgcall.RegisterDeliverySet(ctx, admin, doc, "bench")
	must(err)
	must(pgcall.ActivateDeliverySet(ctx, admin, q))
	_, err = admin.Exec(ctx, `RESET ROLE`)
	must(err)
	_, err = box.Exec(ctx, `INSERT INTO mailbox (msg_id, received_at, message)
		SELECT i, now(), jsonb_build_object('key', 'flight-' || (i % 16), 'type', 'flight.updated',
		       'data', jsonb_build_object('seq', i, 'gate', 'B' || (i % 40), 'status', 'boarding', 'note', repeat('x', 24)))
		  FROM generate_series(1, $1::bigint) AS i`, b.N)
	must(err)

	pc, err := pgx.Connect(ctx, ourDSN)
	must(err)
	defer pc.Close(ctx)
	_, err = pc.Exec(ctx, `SET track_functions = 'pl'; SELECT pg_stat_reset(); SET ROLE outbox_bench_mailbox_pump`)
	must(err)
	cfg := pump.Defaults()
	cfg.Source, cfg.Table, cfg.Worker = "bench", "mailbox", "bench"
	p, err := pump.New(cfg, pc, testdb.Pool(b, boxDSN), reference.MailboxHandler{TenantKind: "organization", TenantID: "t", WorkspaceID: "w"}, nil, nil)
	must(err)
	must(p.Acquire(ctx))

	var tDisc, tHead, tMark time.Duration
	b.ResetTimer()
	start := time.Now()
	for {
		t0 := time.Now()
		if _, err := p.Discover(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for {
			did, err := p.ProcessHead(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if !did {
				break
			}
		}
		t2 := time.Now()
		for {
			n, err := p.Backfill(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		t3 := time.Now()
		tDisc, tHead, tMark = tDisc+t1.Sub(t0), tHead+t2.Sub(t1), tMark+t3.Sub(t2)
		st := p.Stats()
		if st.Marked >= b.N {
			break
		}
		if st.Dead > 0 || st.Failed > 0 {
			b.Fatalf("stats %+v", st)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(tDisc.Microseconds())/n, "discover_µs/msg")
	b.ReportMetric(float64(tHead.Microseconds())/n, "process_µs/msg")
	b.ReportMetric(float64(tMark.Microseconds())/n, "backfill_µs/msg")
	pc.Close(ctx)
	time.Sleep(600 * time.Millisecond) // let the backend flush its function statistics
	rows, err := admin.Query(ctx, `(SELECT schemaname || '.' || funcname || '_self', self_time FROM pg_stat_user_functions
		WHERE schemaname IN ('outbox', 'mailbox', 'refmailbox') ORDER BY self_time DESC LIMIT 6)
		UNION ALL
		SELECT schemaname || '.' || funcname || '_total', total_time FROM pg_stat_user_functions
		WHERE schemaname IN ('outbox', 'mailbox', 'refmailbox') AND funcname IN ('claim_head', 'apply_reference_effect', 'append_events',
		      'append_event', 'complete_head', 'record_discovery', 'record_backfill', 'claim_backfill')`)
	must(err)
	defer rows.Close()
	for rows.Next() {
		var name string
		var ms float64
		must(rows.Scan(&name, &ms))
		b.ReportMetric(ms*1000/n, fmt.Sprintf("%s_µs/msg", name))
	}
}
