package tests

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// Seed 002 ("替代实例与旧实例短暂重叠"), T-2, R-CL-3, R-DP-4, R-AK-8: an old dispatcher process A
// (lease 2 s, lease renewal off) freezes right after its claim committed — the after_claim
// failpoint with the pause action makes it SIGSTOP itself while it holds the leases, before any
// consumer call. A replacement B recovers the expired leases (lease_expired_unknown) and
// finishes all the work. Then A is resumed with SIGCONT: it delivers what it had claimed (the
// consumers find their receipts and answer the same acks, or reject the rejected event again),
// and every one of its late outcome calls is fenced off by the kernel (OB001), counted in A's
// pgoutbox_dispatcher_fencing_rejections_total. Nothing changes in the outbox after the resume,
// nothing is applied twice at the consumers, each attempt start has exactly one finish.
func TestOverlappingDispatcherFencedOff(t *testing.T) {
	t.Parallel()
	bins := cpBuild(t, t.TempDir())
	w := cpSetupWorld(t)
	w.produce(t, 2)
	_, consumerAddr := cpStartConsumers(t, bins, w)

	const workerA, workerB = "cp-overlap-a", "cp-overlap-b"
	a, metricsA := cpStartDispatcher(t, bins, w, consumerAddr, cpDispatcherOpts{
		worker: workerA, lease: "2s", renewal: false, batch: 32, concurrency: 32, failpoints: "after_claim=pause"})
	a.waitLine(t, "failpoint after_claim hit")
	a.waitStopped(t) // barrier: A is frozen holding its leases
	var claimedByA []cpAttempt
	for _, at := range w.attempts(t) {
		if at.Worker == workerA {
			claimedByA = append(claimedByA, at)
		}
	}
	if len(claimedByA) == 0 {
		t.Fatal("A froze without a claim")
	}

	b, _ := cpStartDispatcher(t, bins, w, consumerAddr, cpDispatcherOpts{
		worker: workerB, lease: "30s", renewal: true, batch: 8, concurrency: 8})
	_, _ = w.checkFinal(t) // B alone brought everything to the final state
	before := cpOutboxSnapshot(t, w)
	attBefore := w.attempts(t)
	for _, at := range attBefore {
		if at.Worker == workerA && at.Outcome != "lease_expired_unknown" {
			t.Fatalf("A's attempt on %s/%s finished %q before A resumed, want lease_expired_unknown", at.Destination, at.EventID, at.Outcome)
		}
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Every delivery A had claimed ends in exactly one fenced outcome call (ack for the
	// acknowledged ones, quarantine for the rejected event): wait for all of them (R-DP-4).
	deadline := time.Now().Add(cpDeadline)
	for cpScrape(t, metricsA, "pgoutbox_dispatcher_fencing_rejections_total") < float64(len(claimedByA)) {
		if a.hasExited() || time.Now().After(deadline) {
			t.Fatalf("A counted %v fencing rejections, want %d (exited %v)",
				cpScrape(t, metricsA, "pgoutbox_dispatcher_fencing_rejections_total"), len(claimedByA), a.hasExited())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for cpScrape(t, metricsA, "pgoutbox_dispatcher_inflight_deliveries") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("A still has deliveries in flight")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Exactly one fenced outcome per claimed delivery; none got through as an ack.
	if got := cpScrape(t, metricsA, "pgoutbox_dispatcher_fencing_rejections_total"); got != float64(len(claimedByA)) {
		t.Errorf("A counted %v fencing rejections, want %d", got, len(claimedByA))
	}
	if got := cpScrape(t, metricsA, "pgoutbox_dispatcher_acks_total"); got != 0 {
		t.Errorf("A counted %v acks after resuming, want 0", got)
	}
	a.stop(t) // clean drain: nothing left in flight
	b.stop(t)

	// A's late outcomes changed nothing (R-CL-3): same rows, same states, same finishes.
	if after := cpOutboxSnapshot(t, w); after != before {
		t.Errorf("outbox changed after A resumed:\nbefore %+v\nafter  %+v", before, after)
	}
	attAfter := w.attempts(t)
	if len(attAfter) != len(attBefore) {
		t.Errorf("attempt starts %d → %d after A resumed", len(attBefore), len(attAfter))
	}
	for i := range attAfter {
		if i < len(attBefore) && attAfter[i] != attBefore[i] {
			t.Errorf("attempt changed after A resumed: %+v → %+v", attBefore[i], attAfter[i])
		}
	}
	// Still: effects applied once although A re-delivered everything it had claimed (the
	// consumers answered from their receipts), receipts unique, published == fully acked.
	_, _ = w.checkFinal(t)
}

type cpSnapshot struct {
	Deliveries, Acked, Quarantined, Finishes, QuarantineRows, Published int
	LastFinish, LastPublished                                           time.Time
}

func cpOutboxSnapshot(t *testing.T, w *cpWorld) cpSnapshot {
	t.Helper()
	conn := cpConnect(t, w.producerDSN, "")
	defer conn.Close(context.Background())
	var s cpSnapshot
	if err := conn.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM outbox.outbox_deliveries),
		(SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'acknowledged'),
		(SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'quarantined'),
		(SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes),
		(SELECT count(*) FROM outbox.outbox_quarantine),
		(SELECT count(*) FROM outbox.outbox_publications),
		(SELECT COALESCE(max(finished_at), 'epoch') FROM outbox.outbox_delivery_attempt_finishes),
		(SELECT COALESCE(max(published_at), 'epoch') FROM outbox.outbox_publications)`).
		Scan(&s.Deliveries, &s.Acked, &s.Quarantined, &s.Finishes, &s.QuarantineRows, &s.Published, &s.LastFinish, &s.LastPublished); err != nil {
		t.Fatal(err)
	}
	return s
}
