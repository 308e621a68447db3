package e2e

import (
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/procfix"
)

// Issue 21 item 1, T-3, R-AK-8, R-AK-9: the pipelined cmd/dispatcher (claim-ahead: the next
// batch is claimed while the current one is in flight) is killed by SIGKILL at the moment a
// claim returned rows while deliveries of earlier claims were in their HTTP call and an outcome
// group was waiting for its flush (failpoint pipelined_claim; outcome_flush_interval 50 ms so
// the group is open). Right after the kill the killed worker holds several open attempts:
// claimed ahead and not yet sent, in flight, and answered by the consumer (receipt committed)
// with the outcome still in the unflushed group. Nothing of that is lost and nothing is applied
// twice: after a restart every open attempt of the killed worker ends lease_expired_unknown and
// its delivery is acknowledged on a later attempt; a delivery whose consumer had answered is
// acknowledged with the receipt of the killed run (found again, not applied again); the final
// state is exactly as without the crash (checkFinal: every effect once, every event published
// once).
func TestCrashPipelinedBatchInFlight(t *testing.T) {
	t.Parallel()
	bins := procfix.Build(t, t.TempDir())
	w := procfix.SetupWorld(t)
	w.Produce(t, 6)
	_, consumerAddr := procfix.StartConsumers(t, bins, w)
	killed := "cp-pipeline-1"
	d1, _ := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
		Worker: killed, Lease: "2s", Renewal: true, Batch: 8, Concurrency: 4,
		Failpoints:   failpoint.PipelinedClaim + "=kill",
		ExtraEnvVars: []string{"PGOUTBOX_OUTCOME_FLUSH_INTERVAL=50ms", "PGOUTBOX_PREFETCH=16"}})
	d1.WaitKilled(t)
	d1.WaitLine(t, "failpoint "+failpoint.PipelinedClaim+" hit")
	w.WaitDispatcherBackendsGone(t)

	// Right after the kill: the killed worker's open attempts (no finish) are the ones claimed
	// ahead, in flight, or answered with their outcome unflushed.
	att := w.Attempts(t)
	rc := w.Receipts(t)
	open := cpFilter(att, func(a procfix.Attempt) bool { return a.Worker == killed && a.Outcome == "" })
	answered := 0
	for _, a := range open {
		if _, ok := rc[procfix.ConsumerOf(a.Destination)][a.EventID]; ok {
			answered++
		}
	}
	t.Logf("killed with %d open attempts (%d answered by the consumer, outcome not recorded)", len(open), answered)
	if len(open) < 2 {
		t.Fatalf("the killed dispatcher left %d open attempts; want the in-flight batch and the claimed-ahead one", len(open))
	}

	d2, _ := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
		Worker: "cp-pipeline-2", Lease: "2s", Renewal: true, Batch: 8, Concurrency: 4})
	att, _ = w.CheckFinal(t)
	d2.Stop(t)
	for _, o := range open {
		var mine procfix.Attempt
		for _, a := range att {
			if a.AttemptID == o.AttemptID {
				mine = a
			}
		}
		if mine.Outcome != "lease_expired_unknown" {
			t.Errorf("%s/%s: the killed attempt finished %q, want lease_expired_unknown (recovered)", o.Destination, o.EventID, mine.Outcome)
			continue
		}
		final, ok := cpFinalAfter(att, mine)
		if !ok || (final.Outcome != "acknowledged" && final.Outcome != "non_retryable") {
			t.Errorf("%s/%s: no later terminal attempt (%+v)", o.Destination, o.EventID, final)
		}
	}
}
