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
