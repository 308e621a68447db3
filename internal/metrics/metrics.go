// Package metrics holds the dispatcher's Prometheus collectors and its HTTP server with
// /metrics, /healthz and /readyz (SPEC R-DP-4). Labels are only destination, event_type,
// schema_version, outcome and error_code (plus version/go_version on the build-info gauge):
// never an event, attempt, lease, tenant or request id.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const ns = "pgoutbox"

// Metrics are the dispatcher's collectors on their own registry.
type Metrics struct {
	Registry *prometheus.Registry

	ClaimCalls        *prometheus.CounterVec   // trigger: notify|poll|more
	Claims            *prometheus.CounterVec   // destination, event_type, schema_version
	Acks              *prometheus.CounterVec   // destination, event_type, schema_version, outcome (complete|not_complete)
	Retries           *prometheus.CounterVec   // destination, event_type, schema_version, error_code, outcome (pending|quarantined)
	Quarantines       *prometheus.CounterVec   // destination, event_type, schema_version, error_code
	FencingRejections *prometheus.CounterVec   // destination, outcome (renew|ack|retry|quarantine)
	LeaseExpiries     prometheus.Counter       // attempts closed lease_expired_unknown by this process's recovery
	TransportErrors   *prometheus.CounterVec   // destination, error_code (transport_error|consumer_timeout): no answer at all
	AckRejections     *prometheus.CounterVec   // destination, sqlstate: 200 answers whose ack/receipt the kernel refused
	DatabaseErrors    *prometheus.CounterVec   // outcome (the operation: claim|ack|retry|quarantine|renew|recover|listen|stats)
	DeliveryLatency   *prometheus.HistogramVec // destination, event_type, schema_version, outcome (acknowledged|ack_rejected|ack_unrecorded|retryable|non_retryable|transport_error)
	OutcomeBatchSize  *prometheus.HistogramVec // outcome (the call: ack|retry|quarantine); items per outcome call
	InFlight          prometheus.Gauge
	Pending           *prometheus.GaugeVec // destination
	Leased            *prometheus.GaugeVec // destination
	OldestPendingAge  *prometheus.GaugeVec // destination, seconds
	OldestGapAge      *prometheus.GaugeVec // destination, seconds (R-AK-5)
	StatsUp           prometheus.Gauge     // 1 when the last delivery_stats read succeeded
	BuildInfo         *prometheus.GaugeVec
}

// Version is the dispatcher's version (set with -ldflags "-X .../metrics.Version=…").
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// New creates and registers every collector (plus the Go and process collectors).
func New() *Metrics {
	dl := []string{"destination", "event_type", "schema_version"}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		ClaimCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "claim_calls_total",
			Help: "claim_deliveries calls, by what triggered them: notify (a wake-up on channel outbox_delivery, coalesced to one claim per wake_coalesce), poll (poll_interval), more (the previous claim filled its batch)."}, []string{"trigger"}),
		Claims: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "claims_total",
			Help: "Deliveries claimed (one attempt start each)."}, dl),
		Acks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "acks_total",
			Help: "Deliveries acknowledged through ack_delivery, by publication outcome (complete|not_complete)."}, append(dl, "outcome")),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "retries_total",
			Help: "retry_delivery calls by normalized error code and resulting state (pending|quarantined)."}, append(dl, "error_code", "outcome")),
		Quarantines: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "quarantines_total",
			Help: "Deliveries quarantined (quarantine_delivery, or retry_delivery reaching max attempts) by reason."}, append(dl, "error_code")),
		FencingRejections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "fencing_rejections_total",
			Help: "Outcome or renewal calls rejected by fencing (OB001): another worker owns the delivery now."}, []string{"destination", "outcome"}),
		LeaseExpiries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "lease_expiries_total",
			Help: "Attempts closed as lease_expired_unknown by recover_expired_leases in this process."}),
		TransportErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "transport_errors_total",
			Help: "Consumer calls that got no answer at all (network failure: transport_error; no answer within the timeout: consumer_timeout). An answer the dispatcher or the kernel refuses is not counted here."}, []string{"destination", "error_code"}),
		AckRejections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "ack_rejections_total",
			Help: "200 answers whose ack or receipt the kernel refused (OB002 ack rejected, OB201 not canonicalizable, 22xxx malformed), by SQLSTATE; each is retried as invalid_ack."}, []string{"destination", "sqlstate"}),
		DatabaseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "dispatcher", Name: "database_errors_total",
			Help: "Database calls that failed (not fencing), by operation."}, []string{"outcome"}),
		DeliveryLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "dispatcher", Name: "delivery_duration_seconds",
			Help:    "Consumer call duration (request sent to answer read), by the outcome that counts: acknowledged (the kernel accepted the ack), ack_rejected (a 200 answer the kernel refused), ack_unrecorded (fenced or database error while recording it), retryable, non_retryable (the consumer's answer class), transport_error (no answer).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, append(dl, "outcome")),
		OutcomeBatchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "dispatcher", Name: "outcome_batch_outcomes",
			Help:    "Outcomes recorded per kernel call (ack_deliveries/retry_deliveries/quarantine_deliveries, or a one-row call), by call (ack|retry|quarantine). _count is the number of calls, _sum the outcomes they carried (R-AK-9).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000}}, []string{"outcome"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: "dispatcher", Name: "inflight_deliveries",
			Help: "Deliveries claimed by this process and not yet finished."}),
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "pending_deliveries",
			Help: "Deliveries in status pending (outbox.delivery_stats)."}, []string{"destination"}),
		Leased: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "leased_deliveries",
			Help: "Deliveries in status leased (outbox.delivery_stats)."}, []string{"destination"}),
		OldestPendingAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "oldest_pending_age_seconds",
			Help: "Age of the oldest pending delivery, 0 when none (outbox.delivery_stats)."}, []string{"destination"}),
		OldestGapAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "oldest_gap_age_seconds",
			Help: "Age of the oldest delivery waiting for an earlier aggregate revision (awaiting_revision never exhausts, R-AK-5), 0 when none."}, []string{"destination"}),
		StatsUp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "delivery_stats_up",
			Help: "1 when the last outbox.delivery_stats read succeeded."}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "dispatcher", Name: "build_info",
			Help: "Always 1; the dispatcher's version and Go version."}, []string{"version", "go_version"}),
	}
	m.Registry.MustRegister(m.ClaimCalls, m.Claims, m.Acks, m.Retries, m.Quarantines, m.FencingRejections, m.LeaseExpiries,
		m.TransportErrors, m.AckRejections, m.DatabaseErrors, m.DeliveryLatency, m.OutcomeBatchSize, m.InFlight, m.Pending, m.Leased,
		m.OldestPendingAge, m.OldestGapAge, m.StatsUp, m.BuildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.BuildInfo.WithLabelValues(version(), runtime.Version()).Set(1)
	return m
}

// DestinationStats is one row of outbox.delivery_stats as the gauges need it.
type DestinationStats struct {
	Destination      string
	Pending          int64
	Leased           int64
	OldestPendingAge time.Duration
	OldestGapAge     time.Duration
}

// SetStats replaces the per-destination gauges with rows (destinations absent from rows read 0).
func (m *Metrics) SetStats(destinations []string, rows []DestinationStats) {
	seen := make(map[string]DestinationStats, len(rows))
	for _, r := range rows {
		seen[r.Destination] = r
	}
	for _, d := range destinations {
		r := seen[d]
		m.Pending.WithLabelValues(d).Set(float64(r.Pending))
		m.Leased.WithLabelValues(d).Set(float64(r.Leased))
		m.OldestPendingAge.WithLabelValues(d).Set(r.OldestPendingAge.Seconds())
		m.OldestGapAge.WithLabelValues(d).Set(r.OldestGapAge.Seconds())
	}
}

// Server serves /metrics, /healthz (process alive) and /readyz (ready returns nil).
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen binds addr and returns the dispatcher's metrics server (not yet serving).
func Listen(addr string, m *Metrics, ready func(ctx context.Context) error) (*Server, error) {
	return ListenRegistry(addr, m.Registry, ready)
}

// ListenRegistry binds addr and returns a server (not yet serving) of /metrics for reg, /healthz
// and /readyz (ready decides).
func ListenRegistry(addr string, reg *prometheus.Registry, ready func(ctx context.Context) error) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln}, nil
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until Shutdown.
func (s *Server) Serve() error {
	err := s.srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }
