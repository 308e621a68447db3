package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// Redeliveries is a collector for controlled recoveries of quarantined deliveries (SPEC
// R-AK-10): pgoutbox_redeliveries_total{destination,reason}, the number of re-deliveries so
// far per destination and quarantine reason code (a closed list), read at scrape time from the
// recovery audit through outbox.redelivery_stats. It is a counter read from the database (the
// recovery audit only grows), not a per-process one: every dispatcher reports the same totals,
// so aggregate with max(), and alert on increase(). (A gauge until issue 21 item 6: promlint
// refuses a _total series that is not a counter.) When the read fails the last values read are reported again (none before
// the first success) and pgoutbox_redelivery_stats_up is 0.
type Redeliveries struct {
	db      pgcall.DBTX
	timeout time.Duration
	total   *prometheus.Desc
	up      *prometheus.Desc

	mu   sync.Mutex
	last []pgcall.RedeliveryCount
}

// NewRedeliveries returns the collector over db (a pool whose connections run as
// outbox_dispatcher or outbox_auditor); each scrape's read is bounded by timeout.
func NewRedeliveries(db pgcall.DBTX, timeout time.Duration) *Redeliveries {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Redeliveries{
		db: db, timeout: timeout,
		total: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "redeliveries_total"),
			"Controlled re-deliveries of quarantined deliveries (outbox.redeliver_quarantined) so far, by destination and the quarantine's reason code; a database count (R-AK-10).",
			[]string{"destination", "reason"}, nil),
		up: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "redelivery_stats_up"),
			"1 when the last outbox.redelivery_stats read succeeded.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (r *Redeliveries) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.total
	ch <- r.up
}

// Collect implements prometheus.Collector.
func (r *Redeliveries) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	rows, err := pgcall.RedeliveryStats(ctx, r.db)
	r.mu.Lock()
	if err == nil {
		r.last = rows
	} else {
		rows = r.last
	}
	r.mu.Unlock()
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(r.up, prometheus.GaugeValue, up)
	for _, c := range rows {
		ch <- prometheus.MustNewConstMetric(r.total, prometheus.CounterValue, float64(c.Redeliveries), c.Destination, c.Reason)
	}
}
