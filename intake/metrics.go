package intake

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// clientMetrics are the client's Prometheus metrics (see the package doc). Every label is a
// closed list: outcomes, SQLSTATEs, reasons, results.
type clientMetrics struct {
	outcomes     *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	sendFailures *prometheus.CounterVec
	retries      *prometheus.CounterVec
	reports      *prometheus.CounterVec
	buffered     prometheus.GaugeFunc
}

var (
	outcomeLabels   = []string{OutcomeAcceptedNew, OutcomeAcceptedExisting, OutcomeAcceptedExistingPurged, OutcomeConflict, OutcomeRejected}
	rejectionLabels = []string{SQLStateNotCanonicalizable, SQLStateInvalid, SQLStateQuota}
	reasonLabels    = []string{ReasonQueueFull, ReasonQuota, ReasonUnavailable, ReasonNotAWorkload, ReasonError, ReasonShutdown, ReasonClosed}
)

func newClientMetrics(workload string, buffered func() float64) *clientMetrics {
	var cl prometheus.Labels
	if workload != "" {
		cl = prometheus.Labels{"workload": workload}
	}
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "pgoutbox", Subsystem: "intake_client", Name: name, Help: help, ConstLabels: cl}
	}
	m := &clientMetrics{
		outcomes: prometheus.NewCounterVec(opts("outcomes_total",
			"Submissions answered by intake.accept_observations, by final outcome (a quota rejection that is retried is not final)."), []string{"outcome"}),
		rejections: prometheus.NewCounterVec(opts("rejections_total",
			"Submissions finally rejected, by SQLSTATE (OB201 not canonicalizable, OB702 invalid, OB703 body too large; other)."), []string{"sqlstate"}),
		sendFailures: prometheus.NewCounterVec(opts("send_failures_total",
			"Submissions not sent (dropped), by reason; reported to intake.record_send_failures except reason closed."), []string{"reason"}),
		retries: prometheus.NewCounterVec(opts("retries_total",
			"Submissions resubmitted by the background sender, by reason (quota: OB703 retryAfterSeconds; unavailable: transient error)."), []string{"reason"}),
		reports: prometheus.NewCounterVec(opts("send_failure_reports_total",
			"Calls of intake.record_send_failures, by result (ok, error)."), []string{"result"}),
		buffered: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "intake_client", Name: "buffered",
			Help: "Submissions waiting in the background buffer.", ConstLabels: cl}, buffered),
	}
	for _, l := range outcomeLabels {
		m.outcomes.WithLabelValues(l)
	}
	for _, l := range rejectionLabels {
		m.rejections.WithLabelValues(l)
	}
	for _, l := range reasonLabels {
		m.sendFailures.WithLabelValues(l)
	}
	for _, l := range []string{ReasonQuota, ReasonUnavailable} {
		m.retries.WithLabelValues(l)
	}
	for _, l := range []string{"ok", "error"} {
		m.reports.WithLabelValues(l)
	}
	return m
}

func (m *clientMetrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	cs := []prometheus.Collector{m.outcomes, m.rejections, m.sendFailures, m.retries, m.reports, m.buffered}
	for i, c := range cs {
		if err := r.Register(c); err != nil {
			for _, done := range cs[:i] {
				r.Unregister(done)
			}
			return errors.Join(errors.New("intake: register metrics"), err)
		}
	}
	return nil
}

// outcome counts one final answer.
func (m *clientMetrics) outcome(o Outcome) {
	label := o.Outcome
	switch label {
	case OutcomeAcceptedNew, OutcomeAcceptedExisting, OutcomeAcceptedExistingPurged, OutcomeConflict, OutcomeRejected:
	default:
		label = OutcomeRejected
	}
	m.outcomes.WithLabelValues(label).Inc()
	if label == OutcomeRejected {
		state := o.SQLState
		switch state {
		case SQLStateNotCanonicalizable, SQLStateInvalid, SQLStateQuota:
		default:
			state = "other"
		}
		m.rejections.WithLabelValues(state).Inc()
	}
}
