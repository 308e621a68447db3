package dispatcher

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

func dpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// R-DP-4: /metrics exposes the dispatcher's series (claims, acks, retries, quarantines, fencing
// rejections, lease expiries, transport errors, delivery latency, pending and oldest pending
// age per destination, build info) with low-cardinality labels only: no label is outside
// destination/event_type/schema_version/outcome/error_code, and no value is an event, attempt,
// lease or tenant id. /healthz and /readyz answer.
func TestDispatcherMetricsScrape(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t, dispatcherfix.MeteringDest)
	var first atomic.Value
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		if call == 1 && first.CompareAndSwap(nil, d.EventID) {
			return dispatcherfix.Reply{Kind: "status", Code: 503, Body: `{"code":"consumer_unavailable"}`} // one retry
		}
		return dispatcherfix.Reply{Kind: "ack"}
	})
	srv, h := dispatcherfix.HTTPConsumer(t, c, 5*time.Second)
	cfg := dispatcherfix.Config("dp-metrics", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: h})
	r.M.Registry.MustRegister(metrics.NewRedeliveries(r.Pool, 5*time.Second)) // as dispatcher/app.go does
	ms, err := metrics.Listen("127.0.0.1:0", r.M, r.D.Ready)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ms.Serve() }()
	t.Cleanup(func() { _ = ms.Shutdown(context.Background()) })

	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, db.AppendMetering(t))
	}
	dispatcherfix.Eventually(t, "all acknowledged", func() bool {
		return db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'acknowledged'`) == 3
	})
	// One more event left pending for the backlog gauges (nobody delivers to billing_settlement_catch_up).
	dpAppendType(t, db, "metering.settlement-input.current-changed@1")
	r.D.RefreshStats(context.Background())

	code, body := dpGet(t, "http://"+ms.Addr()+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	// Issue 21 item 6: every series of the real /metrics output passes promlint (the Prometheus
	// naming and metric conventions), the kernel's own and the Go/process collectors'.
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if _, ok := fams["pgoutbox_dispatcher_outcome_batch_size"]; ok {
		t.Errorf("pgoutbox_dispatcher_outcome_batch_size is renamed pgoutbox_dispatcher_outcome_batch_outcomes (a count of outcomes per call, CHANGELOG.md)")
	}
	for _, name := range []string{
		"pgoutbox_dispatcher_claims_total", "pgoutbox_dispatcher_acks_total", "pgoutbox_dispatcher_retries_total",
		"pgoutbox_dispatcher_fencing_rejections_total", "pgoutbox_dispatcher_lease_expiries_total",
		"pgoutbox_dispatcher_transport_errors_total", "pgoutbox_dispatcher_ack_rejections_total", "pgoutbox_dispatcher_delivery_duration_seconds",
		"pgoutbox_dispatcher_inflight_deliveries", "pgoutbox_pending_deliveries", "pgoutbox_oldest_pending_age_seconds",
		"pgoutbox_leased_deliveries", "pgoutbox_dispatcher_build_info", "pgoutbox_delivery_stats_up",
	} {
		if _, ok := fams[name]; !ok {
			t.Errorf("series %s missing", name)
		}
	}
	// Values that must never appear in a label: ids of events, attempts, leases, tenants.
	forbidden := map[string]bool{"tenant-1": true, "workspace-1": true}
	for _, id := range ids {
		forbidden[id] = true
	}
	rows, err := db.Admin.Query(context.Background(), `SELECT attempt_id::text, lease_token::text FROM outbox.outbox_delivery_attempt_starts`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a, l string
		_ = rows.Scan(&a, &l)
		forbidden[a], forbidden[l] = true, true
	}
	rows.Close()
	uuidRE := regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// sqlstate: the kernel's SQLSTATE of a refused ack (a handful of codes: OB002, OB201, 22xxx).
	allowed := map[string]bool{"destination": true, "event_type": true, "schema_version": true, "outcome": true, "error_code": true, "sqlstate": true, "trigger": true}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if uuidRE.MatchString(lp.GetValue()) || forbidden[lp.GetValue()] {
					t.Errorf("%s: label %s carries an id: %q", name, lp.GetName(), lp.GetValue())
				}
				if !strings.HasPrefix(name, "pgoutbox_") {
					continue
				}
				ok := allowed[lp.GetName()] ||
					(name == "pgoutbox_dispatcher_build_info" && (lp.GetName() == "version" || lp.GetName() == "go_version"))
				if !ok {
					t.Errorf("%s: label %q is not in the allowed set", name, lp.GetName())
				}
			}
		}
	}
	// Values: 3 acks, one retry, and the backlog gauge of the unserved destination.
	if v := dpSample(fams, "pgoutbox_dispatcher_acks_total", map[string]string{"destination": dispatcherfix.MeteringDest, "outcome": "complete"}); v != 3 {
		t.Errorf("acks_total = %v", v)
	}
	if v := dpSample(fams, "pgoutbox_dispatcher_retries_total", map[string]string{"error_code": "consumer_unavailable"}); v != 1 {
		t.Errorf("retries_total{consumer_unavailable} = %v", v)
	}
	if v := dpSample(fams, "pgoutbox_pending_deliveries", map[string]string{"destination": dispatcherfix.MeteringDest}); v != 0 {
		t.Errorf("pending{metering} = %v", v)
	}
	if v := dpSample(fams, "pgoutbox_delivery_stats_up", nil); v != 1 {
		t.Errorf("delivery_stats_up = %v", v)
	}
	// Dispatcher-scoped gauges cover configured destinations only; the stats function itself
	// reports every destination (checked directly).
	if v := dpStatsPending(t, db, "billing_settlement_catch_up"); v != 1 {
		t.Errorf("delivery_stats pending{billing_settlement_catch_up} = %d", v)
	}
	if code, body := dpGet(t, "http://"+ms.Addr()+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := dpGet(t, "http://"+ms.Addr()+"/readyz"); code != 200 {
		t.Errorf("/readyz: %d %q", code, body)
	}
}

func dpSample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		match := true
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

func dpStatsPending(t *testing.T, db *dispatcherfix.DB, dest string) int {
	return db.Count(t, `SELECT pending_count::int FROM outbox.delivery_stats() WHERE destination = $1`, dest)
}

func dpAppendType(t *testing.T, db *dispatcherfix.DB, eventType string) string {
	t.Helper()
	sv := "1"
	if strings.HasSuffix(eventType, "@2.0") {
		sv = "2.0"
	}
	return testfix.Append(t, db.Admin, testfix.Envelope(eventType, sv, "agg-"+testfix.NewUUID()[:8], 1))
}

// R-DP-4, R-DP-6: /readyz answers 503 while no delivery set is active.
func TestDispatcherReadyzWithoutActiveDeliverySet(t *testing.T) {
	t.Parallel()
	dsn := dispatcherfix.DatabaseURL(t)
	cfg := dispatcherfix.Config("dp-ready", dpOneDest(dispatcherfix.MeteringDest))
	pc, _ := dispatcher.PoolConfig(cfg, dsn)
	pool := dispatcherfix.Pool(t, pc)
	d, err := dispatcher.New(pool, cfg, dispatcher.Options{Transports: map[string]transport.Transport{
		dispatcherfix.MeteringDest: transport.Func(func(context.Context, wire.Delivery) (wire.Result, error) { return wire.Result{}, nil })}})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := metrics.Listen("127.0.0.1:0", d.Metrics(), d.Ready)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ms.Serve() }()
	t.Cleanup(func() { _ = ms.Shutdown(context.Background()) })
	code, body := dpGet(t, "http://"+ms.Addr()+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no active delivery set") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if strings.Contains(body, "postgres://") {
		t.Fatal("readiness leaks the DSN")
	}
	if code, _ := dpGet(t, "http://"+ms.Addr()+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
}
