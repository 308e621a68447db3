package dispatcher

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// dpOutcomeCalls returns the outcome calls of one kind (ack|retry|quarantine) a dispatcher made
// and the outcomes they carried (pgoutbox_dispatcher_outcome_batch_outcomes _count and _sum).
func dpOutcomeCalls(t *testing.T, m *metrics.Metrics, op string) (calls uint64, items float64) {
	t.Helper()
	var pb dto.Metric
	if err := m.OutcomeBatchSize.WithLabelValues(op).(prometheus.Metric).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum()
}

// R-AK-9, issue 9 item 6: deliveries that finish together share outcome calls. n deliveries
// are held by the consumer until all n are in flight, then answered at once: n-2 valid acks, one
// ack the kernel refuses (OB002: the receipt names another envelope digest; on its retry the
// consumer answers correctly) and one non-retryable answer. The outcomes travel in fewer calls
// than deliveries; the refused item is retried as invalid_ack and later acknowledged, the
// others are acknowledged or quarantined on their first attempt, each with its own per-item
// metrics. A lone delivery afterwards is recorded with one call of one item.
func TestDispatcherGroupsOutcomesFinishingTogether(t *testing.T) {
	t.Parallel()
	const n = 12
	db := dispatcherfix.Setup(t, dispatcherfix.MeteringDest)
	evs := make([]string, n)
	for i := range evs {
		evs[i] = db.AppendMetering(t)
	}
	bad, rejected := evs[3], evs[7]
	release := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	arrived := 0
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		mu.Lock()
		arrived++
		if arrived == n {
			once.Do(func() { close(release) })
		}
		mu.Unlock()
		switch {
		case d.EventID == bad && call == 1:
			ack, rc, err := dispatcherfix.Answer(d)
			if err != nil {
				t.Error(err)
			}
			var m map[string]any
			_ = json.Unmarshal(rc, &m)
			m["eventEnvelopeSha256"] = strings.Repeat("0", 64)
			rc, _ = json.Marshal(m)
			return dispatcherfix.Reply{Kind: "result", Wait: release, Wres: wire.Result{Status: wire.Acknowledged, Ack: ack, Receipt: rc}}
		case d.EventID == rejected:
			return dispatcherfix.Reply{Kind: "result", Wait: release, Wres: wire.Result{Status: wire.NonRetryable, Code: "consumer_rejected"}}
		}
		return dispatcherfix.Reply{Kind: "ack", Wait: release}
	})
	cfg := dispatcherfix.Config("dp-batch", dpOneDest(dispatcherfix.MeteringDest))
	cfg.Concurrency, cfg.BatchSize = n, n
	cfg.OutcomeFlushInterval = 50 * time.Millisecond // the upper bound: grouping must not need it
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: transport.NewInProcess(map[string]wire.Consumer{dispatcherfix.MeteringDest: c})})

	done := func() bool {
		for _, ev := range evs {
			if s := db.Status(t, dispatcherfix.MeteringDest, ev); s != "acknowledged" && s != "quarantined" {
				return false
			}
		}
		return true
	}
	dispatcherfix.Eventually(t, "every delivery terminal", done)

	for _, ev := range evs {
		got := db.Attempts(t, dispatcherfix.MeteringDest, ev)
		switch ev {
		case bad:
			if len(got) != 2 || got[0].Outcome != "retryable" || got[0].Code != "invalid_ack" || got[1].Outcome != "acknowledged" {
				t.Errorf("refused ack: attempts %+v, want invalid_ack then acknowledged", got)
			}
		case rejected:
			if len(got) != 1 || got[0].Outcome != "non_retryable" || got[0].Code != "consumer_rejected" {
				t.Errorf("rejected: attempts %+v", got)
			}
		default:
			if len(got) != 1 || got[0].Outcome != "acknowledged" {
				t.Errorf("%s: attempts %+v", ev, got)
			}
		}
	}
	ackCalls, ackItems := dpOutcomeCalls(t, r.M, "ack")
	retryCalls, retryItems := dpOutcomeCalls(t, r.M, "retry")
	qCalls, qItems := dpOutcomeCalls(t, r.M, "quarantine")
	t.Logf("outcome calls: ack %d for %g items, retry %d for %g, quarantine %d for %g", ackCalls, ackItems, retryCalls, retryItems, qCalls, qItems)
	if ackItems != n || retryItems != 1 || qItems != 1 {
		t.Errorf("outcome items: ack %g (want %d: %d first answers and the retried one), retry %g, quarantine %g", ackItems, n, n-1, retryItems, qItems)
	}
	if total := ackCalls + retryCalls + qCalls; total >= n {
		t.Errorf("%d outcome calls for %d deliveries finishing together: not grouped", total, n)
	}
	if ackCalls >= n-1 {
		t.Errorf("%d ack calls for %d acks answered together", ackCalls, n-1)
	}
	// Per-item metrics are unchanged by grouping.
	if v := dpCounterSum(t, r.M, "pgoutbox_dispatcher_acks_total"); v != n-1 {
		t.Errorf("acks_total = %g, want %d", v, n-1)
	}
	if v := dpCounterSum(t, r.M, "pgoutbox_dispatcher_quarantines_total"); v != 1 {
		t.Errorf("quarantines_total = %g", v)
	}
	if v := dpCounterSum(t, r.M, "pgoutbox_dispatcher_fencing_rejections_total"); v != 0 {
		t.Errorf("fencing_rejections_total = %g", v)
	}

	// A lone delivery: one call of one item (recorded at once: nothing else is running).
	before, _ := dpOutcomeCalls(t, r.M, "ack")
	lone := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "lone delivery acknowledged", func() bool { return db.Status(t, dispatcherfix.MeteringDest, lone) == "acknowledged" })
	dispatcherfix.Eventually(t, "lone ack counted", func() bool { c, _ := dpOutcomeCalls(t, r.M, "ack"); return c == before+1 })
}

func dpCounterSum(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		idx[f.GetName()] = f
	}
	return dpSample(idx, name, nil)
}

// Issue 36 item 3: outcome groups grow with the load. A backlog is delivered to a consumer that
// answers at once; a delivery gives back its claim capacity when it hands its outcome over, so
// claims keep going while groups fill (up to 1000 items, or outcome_flush_interval). The acks
// travel in calls that carry tens of outcomes each on average (never one call per delivery), and
// every delivery is acknowledged exactly once, on its first attempt.
func TestDispatcherOutcomeGroupsGrowWithLoad(t *testing.T) {
	t.Parallel()
	const n = 400
	db := dispatcherfix.Setup(t)
	for range n {
		db.AppendMetering(t)
	}
	c := dispatcherfix.NewConsumer(func(int, wire.Delivery) dispatcherfix.Reply { return dispatcherfix.Reply{Kind: "ack"} })
	cfg := dispatcherfix.Config("dp-groups", dpOneDest(dispatcherfix.MeteringDest))
	cfg.Concurrency, cfg.BatchSize, cfg.Prefetch = 16, 100, 100
	cfg.OutcomeFlushInterval = 50 * time.Millisecond
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: transport.NewInProcess(map[string]wire.Consumer{dispatcherfix.MeteringDest: c})})
	acked := func() int {
		return db.Count(t, `SELECT count(*)::int FROM outbox.outbox_deliveries WHERE destination = $1 AND status = 'acknowledged'`, dispatcherfix.MeteringDest)
	}
	dispatcherfix.Eventually(t, "the backlog acknowledged", func() bool { return acked() == n })
	calls, items := dpOutcomeCalls(t, r.M, "ack")
	t.Logf("%d acks in %d ack calls (%.1f per call)", int(items), calls, items/float64(calls))
	if items != n {
		t.Fatalf("ack outcomes carried: %g, want %d", items, n)
	}
	if calls*10 > n {
		t.Errorf("%d ack calls for %d acks: groups average under 10 outcomes", calls, n)
	}
	if got := db.Count(t, `SELECT count(*)::int FROM outbox.outbox_delivery_attempt_starts WHERE destination = $1`, dispatcherfix.MeteringDest); got != n {
		t.Errorf("%d attempts for %d deliveries: something was delivered twice", got, n)
	}
}

// Issue 36 item 3: a lone outcome is recorded within outcome_flush_interval even while another
// delivery is still running (so the group is not flushed as idle): the consumer holds the first
// delivery; a second one, appended once the first is held, is acknowledged with a call of its
// own while the first is still held.
func TestDispatcherLoneOutcomeFlushedByInterval(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t)
	held := db.AppendMetering(t)
	release := make(chan struct{})
	holding := make(chan struct{})
	var once sync.Once
	c := dispatcherfix.NewConsumer(func(_ int, d wire.Delivery) dispatcherfix.Reply {
		if d.EventID == held {
			once.Do(func() { close(holding) })
			return dispatcherfix.Reply{Kind: "ack", Wait: release}
		}
		return dispatcherfix.Reply{Kind: "ack"}
	})
	cfg := dispatcherfix.Config("dp-lone", dpOneDest(dispatcherfix.MeteringDest))
	cfg.Concurrency, cfg.BatchSize = 4, 4
	cfg.OutcomeFlushInterval = 50 * time.Millisecond
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: transport.NewInProcess(map[string]wire.Consumer{dispatcherfix.MeteringDest: c})})
	select {
	case <-holding: // barrier: the first delivery is in the consumer
	case <-time.After(60 * time.Second): // only keeps a broken test from hanging
		close(release)
		t.Fatal("the first delivery never reached the consumer")
	}
	lone := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "lone delivery acknowledged while the other is held", func() bool {
		return db.Status(t, dispatcherfix.MeteringDest, lone) == "acknowledged"
	})
	if s := db.Status(t, dispatcherfix.MeteringDest, held); s == "acknowledged" {
		t.Fatalf("held delivery is %s before its consumer answered", s)
	}
	if calls, items := dpOutcomeCalls(t, r.M, "ack"); calls != 1 || items != 1 {
		t.Errorf("lone ack: %d calls carrying %g outcomes, want one call of one", calls, items)
	}
	close(release)
	dispatcherfix.Eventually(t, "held delivery acknowledged", func() bool {
		return db.Status(t, dispatcherfix.MeteringDest, held) == "acknowledged"
	})
}
