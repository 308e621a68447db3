//go:build bench

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/producer"
)

// benchDest2Type is the metering pair (one mandatory member: benchDest).
const benchDest2Type = "execution.attempt-eligibility.finalized@1"

// walLSN is pg_current_wal_lsn() as a byte position.
func walLSN(b *testing.B, db *pgx.Conn) int64 {
	b.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkArchive (SPEC R-RT-1, R-RT-3): archive throughput with digest re-verification, in
// events/s moved from the hot tables into the archive (one delivery, one attempt, one
// acknowledged finish and a publication per event), runs of 1000 (one transaction each), and
// the WAL each archived event costs. Fixed size (ARCHIVE_N = 20000 events); b.N is ignored.
func BenchmarkArchive(b *testing.B) {
	const n = 20000
	ctx := context.Background()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	testfix.ActivateReference(b, admin)
	// appended as producers do (Go hot path: the canonical text is stored, D-2), 1 KiB payloads
	prod := testdb.Conn(b, dsn, "outbox_producer")
	for done := 0; done < n; done += 500 {
		evs := make([]producer.Event, 0, 500)
		for i := done; i < done+500; i++ {
			evs = append(evs, benchEvent(benchDest2Type, "1", i))
		}
		if _, err := producer.AppendMany(ctx, prod, evs); err != nil {
			b.Fatal(err)
		}
	}
	disp := testdb.Conn(b, dsn, "outbox_dispatcher")
	for done := 0; done < n; {
		cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "bench", Destinations: []string{benchDest}, BatchSize: 100, Lease: time.Minute})
		if err != nil || len(cs) == 0 {
			b.Fatalf("claim: %v (%d done)", err, done)
		}
		items := make([]pgcall.AckItem, len(cs))
		for i, c := range cs {
			ack, rc := benchReceipt(b, c)
			_, cand, err := testdb.Receipts(b).DigestCandidate(rc)
			if err != nil {
				b.Fatal(err)
			}
			items[i] = pgcall.AckItem{Fence: pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID,
				LeaseToken: c.LeaseToken}, Ack: ack, Receipt: rc, ReceiptDigestCandidate: string(cand)}
		}
		if _, err := pgcall.AckDeliveries(ctx, disp, items); err != nil {
			b.Fatal(err)
		}
		done += len(cs)
	}
	if _, err := admin.Exec(ctx, `CHECKPOINT`); err != nil {
		b.Fatal(err)
	}
	ret := testdb.Conn(b, dsn, "outbox_retention")
	b.ResetTimer()
	wal0 := walLSN(b, admin)
	start := time.Now()
	moved := 0
	for {
		r, err := pgcall.ArchiveEvents(ctx, ret, 0, 1000)
		if err != nil {
			b.Fatal(err)
		}
		if r.Archived == 0 {
			break
		}
		moved += r.Archived
	}
	elapsed := time.Since(start)
	wal := walLSN(b, admin) - wal0
	b.StopTimer()
	if moved != n {
		b.Fatalf("archived %d of %d", moved, n)
	}
	b.ReportMetric(float64(moved)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(wal)/float64(moved), "WAL-B/event")
}

// BenchmarkBootstrap100k (SPEC R-BS-2, R-BS-4): bootstrap rate of a 100k-row legacy table
// (database canonicalization and digest of every envelope, one pending delivery each), runs of
// 10000 rows (one transaction each, under the append lock), and its WAL per row. b.N is ignored.
func BenchmarkBootstrap100k(b *testing.B) {
	const n = 100000
	ctx := context.Background()
	dsn := testdb.URL(b)
	admin := testdb.Conn(b, dsn, "")
	q := testfix.ActivateReference(b, admin)
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE TABLE public.legacy_outbox AS
		SELECT gen_random_uuid() AS event_id, 'execution.attempt-eligibility.finalized@1'::text AS event_type,
		       '1'::text AS event_schema_version, 'agg-' || g AS aggregate_id, 1::bigint AS aggregate_revision,
		       'organization'::text AS tenant_kind, 't-1'::text AS tenant_id, 'w-1'::text AS workspace_id, NULL::text AS project_id,
		       'c-' || g AS correlation_id, 'k-' || g AS causation_id, 'o-' || g AS operation_id,
		       jsonb_build_object('orderId', 'order-' || g, 'customer', 'customer-' || (g %% 97), 'items',
		           (SELECT jsonb_agg(jsonb_build_object('sku', 'sku-' || k, 'quantity', k, 'unitPrice', (10 + k) || '.00', 'note', repeat('n', 20)))
		              FROM generate_series(1, 12) k)) AS payload,
		       now() - interval '400 days' + g * interval '1 second' AS occurred_at,
		       now() - interval '400 days' + g * interval '1 second' AS created_at
		  FROM generate_series(1, %d) g;
		GRANT SELECT ON public.legacy_outbox TO outbox_owner;
		CHECKPOINT`, n)); err != nil {
		b.Fatal(err)
	}
	owner := testdb.Conn(b, dsn, "outbox_owner")
	b.ResetTimer()
	wal0 := walLSN(b, admin)
	start := time.Now()
	imported := 0
	var evidence string
	for {
		r, err := pgcall.BootstrapLegacyEvents(ctx, owner, "public.legacy_outbox", q, 10000)
		if err != nil {
			b.Fatal(err)
		}
		if r.Imported+r.Quarantined == 0 {
			evidence = r.EvidenceSHA256
			break
		}
		imported += r.Imported
	}
	elapsed := time.Since(start)
	wal := walLSN(b, admin) - wal0
	b.StopTimer()
	if imported != n || evidence == "" {
		b.Fatalf("imported %d of %d", imported, n)
	}
	b.ReportMetric(float64(imported)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(wal)/float64(imported), "WAL-B/row")
}
