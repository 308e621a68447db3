package transport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/wire"
)

// traceWireGolden is the HTTP request of sampleDelivery() at t=1764600000 under HMAC v1, every
// header the transport sets (Go's own User-Agent, Accept-Encoding and Content-Length aside):
// the wire as it was before trace context existed.
var traceWireGolden = map[string]string{
	"Accept":                                   "application/json",
	"Content-Type":                             "application/json",
	"Pgoutbox-Attempt-Id":                      "1c7d1f3e-0000-4000-8000-000000000001",
	"Pgoutbox-Attempt-Number":                  "3",
	"Pgoutbox-Consumer":                        "operations_projector",
	"Pgoutbox-Destination":                     "core_operations",
	"Pgoutbox-Event-Envelope-Sha256":           strings.Repeat("ab", 32),
	"Pgoutbox-Event-Id":                        "8a0b5b8e-1f43-4b43-9d7a-0d5f0c7f9a11",
	"Pgoutbox-Expected-Receipt-Schema-Version": "1",
	"Pgoutbox-Expected-Receipt-Type":           "OperationsProjectionAppliedReceipt",
	"Pgoutbox-Required-Projection":             "operations_timeline@1",
	"Pgoutbox-Signature":                       "t=1764600000,v1=",
}

func traceWireRequest(t *testing.T, d wire.Delivery) (http.Header, []byte) {
	t.Helper()
	var got http.Header
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		body, _ = io.ReadAll(r.Body)
		_, _ = w.Write([]byte(`{"ack":{"a":1},"receipt":{"r":2}}`))
	}))
	defer srv.Close()
	h, err := NewHTTP(HTTPOptions{URL: srv.URL, Timeout: 5 * time.Second, Auth: config.AuthHMAC,
		Secret: config.NewSecret([]byte("0123456789abcdef0123")), Now: func() time.Time { return time.Unix(1764600000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Deliver(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"User-Agent", "Accept-Encoding", "Content-Length"} {
		got.Del(k)
	}
	return got, body
}

// R-DP-7 (golden wire): without a trace context the HTTP request is exactly the golden - no
// trace header, the same body and signature; with one, the same request plus traceparent and
// tracestate, and the signature unchanged (it does not cover them).
func TestHTTPTraceHeadersGoldenWire(t *testing.T) {
	t.Parallel()
	plain, plainBody := traceWireRequest(t, sampleDelivery())
	var names []string
	for k, v := range plain {
		names = append(names, k)
		want, ok := traceWireGolden[k]
		if !ok || len(v) != 1 || !strings.HasPrefix(v[0], want) || (k != "Pgoutbox-Signature" && v[0] != want) {
			t.Errorf("header %s = %q, golden %q", k, v, want)
		}
	}
	sort.Strings(names)
	if len(plain) != len(traceWireGolden) {
		t.Fatalf("headers %v, golden has %d", names, len(traceWireGolden))
	}
	if string(plainBody) != string(sampleDelivery().Envelope) {
		t.Fatalf("body %s", plainBody)
	}

	d := sampleDelivery()
	d.TraceParent, d.TraceState = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "rojo=00f067aa0ba902b7"
	traced, tracedBody := traceWireRequest(t, d)
	if traced.Get("traceparent") != d.TraceParent || traced.Get("tracestate") != d.TraceState {
		t.Fatalf("trace headers %q %q", traced.Get("traceparent"), traced.Get("tracestate"))
	}
	traced.Del("traceparent")
	traced.Del("tracestate")
	if len(traced) != len(plain) || string(tracedBody) != string(plainBody) {
		t.Fatalf("traced request differs beyond its trace headers: %v", traced)
	}
	for k := range plain {
		if traced.Get(k) != plain.Get(k) {
			t.Errorf("header %s: %q with trace context, %q without", k, traced.Get(k), plain.Get(k))
		}
	}
	// a traceparent alone: no tracestate header
	d.TraceState = ""
	alone, _ := traceWireRequest(t, d)
	if _, ok := alone["Tracestate"]; ok || alone.Get("traceparent") != d.TraceParent {
		t.Fatalf("traceparent alone: %v", alone)
	}
}
