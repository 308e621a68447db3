package metrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// R-DP-4: every pgoutbox series uses only the allowed labels.
func TestOnlyAllowedLabels(t *testing.T) {
	t.Parallel()
	m := New()
	m.Claims.WithLabelValues("d", "t", "1").Inc()
	m.Acks.WithLabelValues("d", "t", "1", "complete").Inc()
	m.Retries.WithLabelValues("d", "t", "1", "transport_error", "pending").Inc()
	m.Quarantines.WithLabelValues("d", "t", "1", "digest_conflict").Inc()
	m.FencingRejections.WithLabelValues("d", "ack").Inc()
	m.TransportErrors.WithLabelValues("d", "transport_error").Inc()
	m.DatabaseErrors.WithLabelValues("claim").Inc()
	m.DeliveryLatency.WithLabelValues("d", "t", "1", "acknowledged").Observe(0.01)
	m.OutcomeBatchSize.WithLabelValues("ack").Observe(12)
	m.SetStats([]string{"d"}, []DestinationStats{{Destination: "d", Pending: 3, OldestPendingAge: 2 * time.Second}})
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"destination": true, "event_type": true, "schema_version": true, "outcome": true, "error_code": true}
	seen := 0
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "pgoutbox_") {
			continue
		}
		seen++
		for _, mm := range f.GetMetric() {
			for _, lp := range mm.GetLabel() {
				if !allowed[lp.GetName()] && !(f.GetName() == "pgoutbox_dispatcher_build_info" && (lp.GetName() == "version" || lp.GetName() == "go_version")) {
					t.Errorf("%s has label %s", f.GetName(), lp.GetName())
				}
			}
		}
	}
	if seen < 15 {
		t.Fatalf("only %d pgoutbox families", seen)
	}
}

func TestServerEndpoints(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	s, err := Listen("127.0.0.1:0", New(), func(context.Context) error {
		if !ready.Load() {
			return errNotReady
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	defer s.Shutdown(context.Background())
	get := func(p string) (int, string) {
		resp, err := http.Get("http://" + s.Addr() + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, _ := get("/healthz"); c != 200 {
		t.Fatalf("healthz %d", c)
	}
	if c, b := get("/readyz"); c != 503 || !strings.Contains(b, "not ready") {
		t.Fatalf("readyz %d %q", c, b)
	}
	ready.Store(true)
	if c, _ := get("/readyz"); c != 200 {
		t.Fatalf("readyz %d", c)
	}
	if c, b := get("/metrics"); c != 200 || !strings.Contains(b, "pgoutbox_dispatcher_build_info") {
		t.Fatalf("metrics %d", c)
	}
}

type notReady struct{}

func (notReady) Error() string { return "not ready" }

var errNotReady error = notReady{}
