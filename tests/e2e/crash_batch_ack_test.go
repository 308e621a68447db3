package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/procfix"
)

// R-AK-9, R-AK-8, T-3: the real cmd/dispatcher is killed by SIGKILL while a batch ack is in
// flight: ack_deliveries has run for two or more deliveries and returned its rows, its
// transaction is not committed (failpoint during_batch_ack; under armed failpoints the batch
// runs in an explicit transaction so the kill lands between the statement and its commit). The
// batch is all or nothing: right after the kill every delivery of the batch is still leased to
// the killed attempt with no finish (the consumers' receipts are committed), and nowhere in the
// database is there half an outcome — no acknowledged delivery without its acknowledged finish
// on the current attempt, no acknowledged finish without the acknowledged state, no publication
// without every mandatory delivery acknowledged (nor the converse). After a restart the leases
// are recovered (lease_expired_unknown), the deliveries re-delivered, the consumers find their
// receipts and the same acks are recorded: every effect once, every event published once.
func TestCrashDuringBatchAck(t *testing.T) {
	t.Parallel()
	bins := procfix.Build(t, t.TempDir())
	w := procfix.SetupWorld(t)
	w.Produce(t, 2)
	_, consumerAddr := procfix.StartConsumers(t, bins, w)
	killed := "cp-batch-ack-1"
	d1, _ := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
		Worker: killed, Lease: "2s", Renewal: true, Batch: 8, Concurrency: 8,
		Failpoints:   failpoint.DuringBatchAck + "=kill",
		ExtraEnvVars: []string{"PGOUTBOX_OUTCOME_FLUSH_INTERVAL=50ms"}})
	d1.WaitKilled(t)
	d1.WaitLine(t, "failpoint "+failpoint.DuringBatchAck+" hit")
	w.WaitDispatcherBackendsGone(t)
	var logged struct {
		Items      int      `json:"items"`
		Deliveries []string `json:"deliveries"`
	}
	if err := json.Unmarshal([]byte(d1.WaitLine(t, "ack_deliveries returned; its transaction is not committed yet")), &logged); err != nil {
		t.Fatal(err)
	}
	if logged.Items < 2 || len(logged.Deliveries) != logged.Items {
		t.Fatalf("the killed batch: %+v (want two or more deliveries)", logged)
	}
	t.Logf("killed during a batch ack of %d deliveries", logged.Items)
	type key struct{ dest, event string }
	batch := map[key]bool{}
	for _, s := range logged.Deliveries {
		dest, ev, _ := strings.Cut(s, "/")
		batch[key{dest, ev}] = true
	}

	// Right after the kill: nothing of the batch committed, and no half outcome anywhere.
	ctx := context.Background()
	admin := procfix.Connect(t, w.ProducerDSN, "")
	defer admin.Close(ctx)
	rc := w.Receipts(t)
	for k := range batch {
		var status, worker, outcome string
		var current bool
		if err := admin.QueryRow(ctx, `
			SELECT d.status, s.worker, COALESCE(f.outcome, ''), s.attempt_id = d.current_attempt_id
			FROM outbox.outbox_deliveries d
			JOIN outbox.outbox_delivery_attempt_starts s ON s.destination = d.destination AND s.event_id = d.event_id
			LEFT JOIN outbox.outbox_delivery_attempt_finishes f ON f.attempt_id = s.attempt_id
			WHERE d.destination = $1 AND d.event_id = $2::uuid
			ORDER BY s.attempt_number DESC LIMIT 1`, k.dest, k.event).Scan(&status, &worker, &outcome, &current); err != nil {
			t.Fatal(err)
		}
		if status != "leased" || worker != killed || outcome != "" || !current {
			t.Errorf("%s/%s after the kill: status %s, last attempt by %s finished %q (current %t); want leased to the killed attempt, no finish",
				k.dest, k.event, status, worker, outcome, current)
		}
		if _, ok := rc[procfix.ConsumerOf(k.dest)][k.event]; !ok {
			t.Errorf("%s/%s: the consumer has no receipt, yet its ack was in the batch", k.dest, k.event)
		}
	}
	var ackedNoFinish, finishNoAck int
	if err := admin.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM outbox.outbox_deliveries d WHERE d.status = 'acknowledged' AND NOT EXISTS (
			SELECT 1 FROM outbox.outbox_delivery_attempt_finishes f WHERE f.attempt_id = d.current_attempt_id AND f.outcome = 'acknowledged')),
		(SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes f
			JOIN outbox.outbox_delivery_attempt_starts s ON s.attempt_id = f.attempt_id
			JOIN outbox.outbox_deliveries d ON d.destination = s.destination AND d.event_id = s.event_id
			WHERE f.outcome = 'acknowledged' AND (d.status <> 'acknowledged' OR d.current_attempt_id <> f.attempt_id))`).
		Scan(&ackedNoFinish, &finishNoAck); err != nil {
		t.Fatal(err)
	}
	if ackedNoFinish != 0 || finishNoAck != 0 {
		t.Errorf("half outcomes after the kill: %d acknowledged deliveries without their finish, %d acknowledged finishes without the state", ackedNoFinish, finishNoAck)
	}
	auditor := procfix.Connect(t, w.ProducerDSN, "outbox_auditor")
	s, err := pgcall.ReadPublicationSummary(ctx, auditor)
	auditor.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Published != s.FullyAcked {
		t.Errorf("after the kill: %d events published, %d fully acknowledged", s.Published, s.FullyAcked)
	}

	// Restart: recovery, re-delivery, the same acks; the final state is as without the crash.
	d2, _ := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
		Worker: "cp-batch-ack-2", Lease: "2s", Renewal: true, Batch: 8, Concurrency: 8})
	att, rc := w.CheckFinal(t)
	d2.Stop(t)
	for k := range batch {
		var mine, final procfix.Attempt
		for _, a := range att {
			if a.Destination == k.dest && a.EventID == k.event && a.Worker == killed && a.Number > mine.Number {
				mine = a
			}
		}
		if mine.Outcome != "lease_expired_unknown" {
			t.Errorf("%s/%s: the killed attempt finished %q, want lease_expired_unknown (recovered)", k.dest, k.event, mine.Outcome)
			continue
		}
		final, ok := cpFinalAfter(att, mine)
		if !ok || final.Outcome != "acknowledged" {
			t.Errorf("%s/%s: no later acknowledged attempt (%+v)", k.dest, k.event, final)
			continue
		}
		if r := rc[procfix.ConsumerOf(k.dest)][k.event]; !r.RecordedAt.Before(final.StartedAt) {
			t.Errorf("%s/%s: receipt at %v, re-delivery at %v: want the receipt of the killed run found again (R-AK-8)", k.dest, k.event, r.RecordedAt, final.StartedAt)
		}
	}
}
