package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/procfix"
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
	bins := procfix.Build(t, t.TempDir())
	w := procfix.SetupWorld(t)
	w.Produce(t, 2)
	_, consumerAddr := procfix.StartConsumers(t, bins, w)

	const workerA, workerB = "cp-overlap-a", "cp-overlap-b"
	a, metricsA := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
		Worker: workerA, Lease: "2s", Renewal: false, Batch: 32, Concurrency: 32, Failpoints: "after_claim=pause"})
	a.WaitLine(t, "failpoint after_claim hit")
	a.WaitStopped(t) // barrier: A is frozen holding its leases
	var claimedByA []procfix.Attempt
	for _, at := range w.Attempts(t) {
		if at.Worker == workerA {
			claimedByA = append(claimedByA, at)
		}
	}
	if len(claimedByA) == 0 {
		t.Fatal("A froze without a claim")
	}

	b, _ := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
		Worker: workerB, Lease: "30s", Renewal: true, Batch: 8, Concurrency: 8})
	_, _ = w.CheckFinal(t) // B alone brought everything to the final state
	before := cpOutboxSnapshot(t, w)
	attBefore := w.Attempts(t)
	for _, at := range attBefore {
		if at.Worker == workerA && at.Outcome != "lease_expired_unknown" {
			t.Fatalf("A's attempt on %s/%s finished %q before A resumed, want lease_expired_unknown", at.Destination, at.EventID, at.Outcome)
		}
	}

	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Every delivery A had claimed ends in exactly one fenced outcome call (ack for the
	// acknowledged ones, quarantine for the rejected event): wait for all of them (R-DP-4).
	deadline := time.Now().Add(procfix.Deadline)
	for procfix.Scrape(t, metricsA, "pgoutbox_dispatcher_fencing_rejections_total") < float64(len(claimedByA)) {
		if a.HasExited() || time.Now().After(deadline) {
			t.Fatalf("A counted %v fencing rejections, want %d (exited %v)",
				procfix.Scrape(t, metricsA, "pgoutbox_dispatcher_fencing_rejections_total"), len(claimedByA), a.HasExited())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for procfix.Scrape(t, metricsA, "pgoutbox_dispatcher_inflight_deliveries") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("A still has deliveries in flight")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Exactly one fenced outcome per claimed delivery; none got through as an ack.
	if got := procfix.Scrape(t, metricsA, "pgoutbox_dispatcher_fencing_rejections_total"); got != float64(len(claimedByA)) {
		t.Errorf("A counted %v fencing rejections, want %d", got, len(claimedByA))
	}
	if got := procfix.Scrape(t, metricsA, "pgoutbox_dispatcher_acks_total"); got != 0 {
		t.Errorf("A counted %v acks after resuming, want 0", got)
	}
	a.Stop(t) // clean drain: nothing left in flight
	b.Stop(t)

	// A's late outcomes changed nothing (R-CL-3): same rows, same states, same finishes.
	if after := cpOutboxSnapshot(t, w); after != before {
		t.Errorf("outbox changed after A resumed:\nbefore %+v\nafter  %+v", before, after)
	}
	attAfter := w.Attempts(t)
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
	_, _ = w.CheckFinal(t)
}

type cpSnapshot struct {
	Deliveries, Acked, Quarantined, Finishes, QuarantineRows, Published int
	LastFinish, LastPublished                                           time.Time
}

func cpOutboxSnapshot(t *testing.T, w *procfix.World) cpSnapshot {
	t.Helper()
	conn := procfix.Connect(t, w.ProducerDSN, "")
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
