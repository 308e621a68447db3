package tests

import (
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"
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
	bins := cpBuild(t, t.TempDir())
	w := cpSetupWorld(t)
	w.produce(t, 6)
	_, consumerAddr := cpStartConsumers(t, bins, w)
	killed := "cp-pipeline-1"
	d1, _ := cpStartDispatcher(t, bins, w, consumerAddr, cpDispatcherOpts{
		worker: killed, lease: "2s", renewal: true, batch: 8, concurrency: 4,
		failpoints:   failpoint.PipelinedClaim + "=kill",
		extraEnvVars: []string{"PGOUTBOX_OUTCOME_FLUSH_INTERVAL=50ms", "PGOUTBOX_PREFETCH=16"}})
	d1.waitKilled(t)
	d1.waitLine(t, "failpoint "+failpoint.PipelinedClaim+" hit")
	w.waitDispatcherBackendsGone(t)

	// Right after the kill: the killed worker's open attempts (no finish) are the ones claimed
	// ahead, in flight, or answered with their outcome unflushed.
	att := w.attempts(t)
	rc := w.receipts(t)
	open := cpFilter(att, func(a cpAttempt) bool { return a.Worker == killed && a.Outcome == "" })
	answered := 0
	for _, a := range open {
		if _, ok := rc[cpConsumerOf(a.Destination)][a.EventID]; ok {
			answered++
		}
	}
	t.Logf("killed with %d open attempts (%d answered by the consumer, outcome not recorded)", len(open), answered)
	if len(open) < 2 {
		t.Fatalf("the killed dispatcher left %d open attempts; want the in-flight batch and the claimed-ahead one", len(open))
	}

	d2, _ := cpStartDispatcher(t, bins, w, consumerAddr, cpDispatcherOpts{
		worker: "cp-pipeline-2", lease: "2s", renewal: true, batch: 8, concurrency: 4})
	att, _ = w.checkFinal(t)
	d2.stop(t)
	for _, o := range open {
		var mine cpAttempt
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
