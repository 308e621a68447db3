package kernel

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// dxBulkAppend appends n metering events (one delivery each) in one transaction through
// outbox.append_event as outbox_producer (database-side canonicalization, triggers and the
// deferred delivery-set check all apply).
func dxBulkAppend(t testing.TB, db pgcall.DBTX, n int, aggPrefix string) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, `SET ROLE outbox_producer`); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = db.Exec(ctx, `RESET ROLE`) }()
	var got int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, $1) AS g,
		LATERAL outbox.append_event(json_build_object(
			'eventType', 'execution.attempt-eligibility.finalized@1', 'eventSchemaVersion', '1',
			'aggregateId', $2 || g, 'aggregateRevision', 1,
			'tenant', json_build_object('tenantKind', 'organization', 'tenantId', 'tenant-1', 'workspaceId', 'workspace-1'),
			'payload', json_build_object('n', g))) AS a`, n, aggPrefix).Scan(&got); err != nil {
		t.Fatalf("bulk append: %v", err)
	}
	if got != n {
		t.Fatalf("bulk append: %d of %d", got, n)
	}
}

// T-2, R-CL-1, R-CL-3, D-7: 8 concurrent claimers (real connections, batch 50) over 10000
// deliveries: no delivery is ever handed to two claimers (each claimed delivery is acked by its
// claimer before it claims again, so a second claim of any event id would be a double claim),
// and at the end every delivery is acknowledged with exactly one start and one acknowledged
// finish, and every event is published. (About 16 s on two shared cores.)
func TestConcurrentClaimersNeverShareADelivery(t *testing.T) {
	t.Parallel()
	const (
		deliveries = 10000
		claimers   = 8
		batch      = 50
	)
	b := kernelfix.Setup(t)
	ctx := context.Background()
	dxBulkAppend(t, b.Admin, deliveries, "agg-")

	conns := make([]*pgx.Conn, claimers)
	for i := range conns {
		conns[i] = testdb.Conn(t, b.Dsn, "outbox_dispatcher")
	}
	var mu sync.Mutex
	seen := map[string]string{} // event id -> claimer
	var dup []string
	start := make(chan struct{})
	errs := make(chan error, claimers)
	var wg sync.WaitGroup
	for i := 0; i < claimers; i++ {
		wg.Add(1)
		go func(i int, conn *pgx.Conn) {
			defer wg.Done()
			worker := fmt.Sprintf("worker-%d", i)
			<-start
			for {
				cs, err := pgcall.ClaimDeliveries(ctx, conn, pgcall.ClaimParams{Worker: worker, Destinations: []string{kernelfix.DestMetering}, BatchSize: batch, Lease: kernelfix.LongLease})
				if err != nil {
					errs <- fmt.Errorf("%s claim: %w", worker, err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					if w, ok := seen[c.EventID]; ok {
						dup = append(dup, fmt.Sprintf("%s claimed by %s and %s", c.EventID, w, worker))
					}
					seen[c.EventID] = worker
				}
				mu.Unlock()
				for _, c := range cs {
					ack, rc := kernelfix.ValidAck(t, c)
					res, err := pgcall.AckDelivery(ctx, conn, kernelfix.FenceOf(c), ack, rc)
					if err != nil || res != "complete" {
						errs <- fmt.Errorf("%s ack %s: %q %w", worker, c.EventID, res, err)
						return
					}
				}
			}
		}(i, conns[i])
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(dup) > 0 {
		t.Fatalf("%d double claims, e.g. %s", len(dup), dup[0])
	}
	if len(seen) != deliveries {
		t.Fatalf("claimed %d distinct deliveries, want %d", len(seen), deliveries)
	}
	var notAcked, badStarts, badFinishes, unpublished int
	if err := b.Admin.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM outbox.outbox_deliveries WHERE status <> 'acknowledged'),
		(SELECT count(*) FROM outbox.outbox_deliveries d WHERE (SELECT count(*) FROM outbox.outbox_delivery_attempt_starts s
			WHERE s.destination = d.destination AND s.event_id = d.event_id) <> 1),
		(SELECT count(*) FROM outbox.outbox_deliveries d WHERE (SELECT count(*) FROM outbox.outbox_delivery_attempt_starts s
			JOIN outbox.outbox_delivery_attempt_finishes f USING (attempt_id)
			WHERE s.destination = d.destination AND s.event_id = d.event_id AND f.outcome = 'acknowledged') <> 1),
		(SELECT count(*) FROM outbox.outbox_events e WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id))`).
		Scan(&notAcked, &badStarts, &badFinishes, &unpublished); err != nil {
		t.Fatal(err)
	}
	if notAcked != 0 || badStarts != 0 || badFinishes != 0 || unpublished != 0 {
		t.Fatalf("not acknowledged %d, deliveries without exactly one start %d, without exactly one acknowledged finish %d, unpublished events %d",
			notAcked, badStarts, badFinishes, unpublished)
	}
	per := map[string]int{}
	for _, w := range seen {
		per[w]++
	}
	t.Logf("claims per worker: %v", per)
}
