package pump

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the pump's Prometheus collectors (SPEC R-MX-12) on their own registry. The only
// label is the source name (and an outcome from a closed list): never a message id or key.
type Metrics struct {
	// Registry holds the pump's collectors (served on /metrics).
	Registry *prometheus.Registry

	Ticks              *prometheus.CounterVec // source
	TickFailures       *prometheus.CounterVec // source
	Processed          *prometheus.CounterVec // source, outcome (succeeded|dead|failed)
	Backfills          *prometheus.CounterVec // source, outcome (written|already_marked|missing|transient)
	BackfillsAbandoned *prometheus.CounterVec // source (alert on any increase: a mark was given up)
	Watermark          *prometheus.GaugeVec   // source
	LagIDs             *prometheus.GaugeVec   // source: unfinished processing rows
	LagSeconds         *prometheus.GaugeVec   // source: age of the oldest unfinished row
	MailboxLagIDs      *prometheus.GaugeVec   // source: the mailbox's highest msg_id − W
	OpenHoles          *prometheus.GaugeVec   // source: hole ids open now
	ReleasedHoles      *prometheus.GaugeVec   // source: hole ids released so far
	LateRows           *prometheus.GaugeVec   // source: rows that committed inside a released hole
	OldestUnmarked     *prometheus.GaugeVec   // source: seconds since the oldest terminal row owing a mark finished
	Abandoned          *prometheus.GaugeVec   // source: abandoned, unresolved backfills
	DeadLetters        *prometheus.GaugeVec   // source

	lastBeat atomic.Int64 // unix nanoseconds of the last completed tick
}

// NewMetrics creates and registers the collectors; heartbeat age is computed at scrape time.
func NewMetrics(source string) *Metrics {
	const ns, sub = "pgoutbox", "mailbox"
	r := prometheus.NewRegistry()
	m := &Metrics{Registry: r}
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, append([]string{"source"}, labels...))
		r.MustRegister(c)
		return c
	}
	gv := func(name, help string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, []string{"source"})
		r.MustRegister(g)
		return g
	}
	m.Ticks = cv("job_ticks_total", "Pump ticks (discover, process, backfill) completed.")
	m.TickFailures = cv("job_failures_total", "Pump ticks that failed (the pump retries on the next tick).")
	m.Processed = cv("processed_total", "Head outcomes recorded by this pump.", "outcome")
	m.Backfills = cv("backfill_total", "Processed-mark outcomes in the mailbox.", "outcome")
	m.BackfillsAbandoned = cv("backfill_abandoned_total", "Backfills abandoned by this pump (missing row, or transient past the deadline): alert.")
	m.Watermark = gv("watermark", "Watermark W (every id <= W is enqueued or a released hole).")
	m.LagIDs = gv("watermark_lag_ids", "Unfinished processing rows (pending or failed).")
	m.LagSeconds = gv("watermark_lag_seconds", "Age on our clock of the oldest unfinished processing row.")
	m.MailboxLagIDs = gv("watermark_behind_mailbox_ids", "The mailbox's highest id minus W (ids the watermark has not passed yet).")
	m.OpenHoles = gv("open_holes", "Hole ids open now (W waits for them).")
	m.ReleasedHoles = gv("released_holes", "Hole ids released so far (W skipped them).")
	m.LateRows = gv("late_rows", "Rows that committed inside a released hole (operator attention).")
	m.OldestUnmarked = gv("backfill_oldest_unmarked_seconds", "Seconds since the oldest terminal row still owing its processed mark finished.")
	m.Abandoned = gv("backfill_abandoned", "Abandoned backfills not yet resolved by an operator.")
	m.DeadLetters = gv("dead_letters", "Dead processing rows (kept, visible).")
	// Series that start at zero are exported from the start (alerts on "increase" need them).
	m.Ticks.WithLabelValues(source)
	m.TickFailures.WithLabelValues(source)
	m.BackfillsAbandoned.WithLabelValues(source)
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "job_heartbeat_age_seconds",
		Help: "Seconds since the pump last completed a tick.", ConstLabels: prometheus.Labels{"source": source},
	}, func() float64 {
		t := m.lastBeat.Load()
		if t == 0 {
			return -1
		}
		return time.Since(time.Unix(0, t)).Seconds()
	}))
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) beat() { m.lastBeat.Store(time.Now().UnixNano()) }
