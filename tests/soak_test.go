package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/soak"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/reference"
)

// T-8 (short), R-AK-8, R-CO-1, R-AK-4: the bounded soak inside `make test`. 400 runs of the 13
// reference event types (5,200 events + 1 rejected) appended by 4 concurrent producers through
// producer.Append, delivered over loopback HTTP with HMAC to the four reference consumers (each
// in its own database), with 5 % retryable failures injected before applying, 1 % lost acks
// after the receipt commit, and two dispatcher restarts with a 1 ms shutdown grace while work is
// in flight. About 25 s alone on the 2-core machine (`make soak` runs the 100k version).
//
// The report must pass every invariant (nothing lost, no duplicate effect, published = fully
// acknowledged, every start at most one finish, no open attempt) AND prove that the faults
// actually happened: a soak that injects nothing proves nothing.
func TestSoakShort(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("soak skipped in -short mode")
	}
	dsns := map[string]string{}
	for _, s := range reference.All() {
		dsns[s.ConsumerName] = testdb.URL(t)
	}
	ctx := context.Background()
	rep, err := soak.Run(ctx, soak.Config{
		ProducerDSN: testdb.URL(t), ConsumerDSNs: dsns,
		Events: 5200, Producers: 4, Rejected: true,
		FailureRate: 0.05, LostAckRate: 0.01, Seed: uint64(time.Now().UnixNano()),
		Restarts: 2, TimeLimit: 4 * time.Minute,
		Concurrency: 32, BatchSize: 32, Lease: 2 * time.Second, Transport: soak.TransportHTTP,
	})
	if err != nil {
		t.Fatalf("soak could not run: %v", err)
	}
	t.Logf("soak: %d events, %d deliveries in %s (%.0f events/s); attempts %v; finishes %v; abandoned %d, recovered %d, fenced %d",
		rep.EventsInDB, rep.Deliveries, rep.Duration.Round(time.Millisecond), rep.EventsPerSecond(), rep.AttemptsHistogram,
		rep.Finishes, rep.AbandonedInFlight, rep.RecoveredLeases, rep.FencingRejections)
	if err := rep.Check(); err != nil {
		t.Fatalf("%v\n\n%s", err, rep.Markdown())
	}
	// The invariants are not vacuous: the run is the size asked for.
	if rep.EventsInDB != 5201 || rep.Deliveries != 400*soak.DeliveriesPerRun+1 || rep.Published != 5200 {
		t.Fatalf("events %d, deliveries %d, published %d", rep.EventsInDB, rep.Deliveries, rep.Published)
	}
	// The faults happened and were survived.
	// (An injected answer can meet a dispatcher being stopped: it is then abandoned, not recorded.)
	if rep.InjectedBefore == 0 || rep.Finishes["retryable/consumer_unavailable"] < rep.InjectedBefore-rep.AbandonedInFlight {
		t.Errorf("injected before-apply failures %d, recorded consumer_unavailable retries %d", rep.InjectedBefore, rep.Finishes["retryable/consumer_unavailable"])
	}
	if rep.InjectedLostAcks == 0 || rep.LostAckDeliveries == 0 || rep.LostAcksRedelivered != rep.LostAckDeliveries {
		t.Errorf("lost acks %d on %d deliveries, %d acknowledged on a later attempt", rep.InjectedLostAcks, rep.LostAckDeliveries, rep.LostAcksRedelivered)
	}
	if rep.Retries == 0 || rep.AttemptsHistogram[1] == int64(rep.Deliveries) {
		t.Errorf("no retries: %v", rep.AttemptsHistogram)
	}
	if rep.RestartsDone != 2 || len(rep.Workers) != 3 {
		t.Errorf("restarts %d, dispatcher instances %v", rep.RestartsDone, rep.Workers)
	}
	// R-AK-8: deliveries abandoned by the restarts came back through lease expiry.
	if rep.AbandonedInFlight == 0 || rep.RecoveredLeases < rep.AbandonedInFlight {
		t.Errorf("abandoned %d in-flight deliveries, recovered %d leases", rep.AbandonedInFlight, rep.RecoveredLeases)
	}
	// The one rejected event is the only quarantine, and it is visible in the report.
	if len(rep.Quarantined) != 1 || rep.Quarantined[0].Reason != "consumer_rejected" {
		t.Errorf("quarantined %+v", rep.Quarantined)
	}
	if md := rep.Markdown(); !strings.Contains(md, "Verdict: PASS") || !strings.Contains(md, "| core_operations | consumer_rejected | 1 |") {
		t.Errorf("report does not render the verdict/quarantine:\n%s", md)
	}
}

// T-8: Report.Check is the machine check of the soak; it must name every violated invariant
// (a checker that cannot fail proves nothing).
func TestSoakReportCheckNamesEveryViolation(t *testing.T) {
	t.Parallel()
	ok := soak.Report{Config: soak.Config{Rejected: true, TimeLimit: time.Minute}, ExpectedEvents: 14, EventsAppended: 14,
		EventsInDB: 14, ExpectedDeliveries: 15, Deliveries: 15, Published: 13, FullyAcked: 13,
		Quarantined:       []soak.QuarantineCount{{Destination: "core_operations", Reason: "consumer_rejected", Count: 1}},
		RestartsRequested: 2, RestartsDone: 2, LostAckDeliveries: 3, LostAcksRedelivered: 3}
	if err := ok.Check(); err != nil {
		t.Fatalf("a clean report fails: %v", err)
	}
	bad := ok
	bad.TimedOut = true
	bad.EventsInDB = 13
	bad.EventsMissing, bad.NonTerminal, bad.Lost = 1, 2, 3
	bad.Published = 12
	bad.DuplicatesApplied = 1
	bad.MultiFinish = 1
	bad.OpenAttempts = 2
	bad.EffectMismatch = 1
	bad.ReceiptMismatch = 1
	bad.InvalidAcks = 1
	bad.LostAcksRedelivered = 2
	bad.RestartsDone = 1
	bad.AttemptCountSkew = 1
	bad.Quarantined = []soak.QuarantineCount{{Destination: "metering_input_processor", Reason: "retry_exhausted", Count: 1}}
	err := bad.Check()
	if err == nil {
		t.Fatal("a broken report passes")
	}
	for _, want := range []string{"time limit", "events in the database 13", "lost 3", "published 12 != fully acknowledged 13",
		"duplicates applied", "more than one finish", "open attempts 2", "effects applied differ", "receipts differ",
		"invalid acks", "acknowledged on a later attempt 2", "restarts done 1 of 2", "attempt_count", "unexpected quarantine",
		"retry_exhausted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check does not name %q:\n%v", want, err)
		}
	}
}
