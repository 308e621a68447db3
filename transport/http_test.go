package transport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/wire"
)

func sampleDelivery() wire.Delivery {
	return wire.Delivery{
		Destination: "core_operations", ConsumerName: "operations_projector",
		EventID: "8a0b5b8e-1f43-4b43-9d7a-0d5f0c7f9a11", AttemptID: "1c7d1f3e-0000-4000-8000-000000000001",
		AttemptNumber: 3, ExpectedReceiptType: "OperationsProjectionAppliedReceipt", ExpectedReceiptSchemaVersion: 1,
		RequiredProjectionName: "operations_timeline", RequiredProjectionVersion: 1,
		Envelope:                       json.RawMessage(`{"eventId":"8a0b5b8e-1f43-4b43-9d7a-0d5f0c7f9a11","payload":{"a":1}}`),
		EnvelopeDigestAlgorithmVersion: "jcs-sha256-v1",
		EnvelopeSHA256:                 strings.Repeat("ab", 32),
	}
}

// R-DP-2: the request carries the canonical envelope as body, the wire headers and the
// HMAC-SHA256 signature of the body.
func TestHTTPRequestHeadersAndHMAC(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123")
	d := sampleDelivery()
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{"ack":{"a":1},"receipt":{"r":2}}`))
	}))
	defer srv.Close()
	h, err := NewHTTP(HTTPOptions{URL: srv.URL, Timeout: 2 * time.Second, Auth: config.AuthHMAC, Secret: config.NewSecret(secret),
		Now: func() time.Time { return time.Unix(1764600000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Deliver(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != wire.Acknowledged || string(res.Ack) != `{"a":1}` || string(res.Receipt) != `{"r":2}` {
		t.Fatalf("result %+v", res)
	}
	if got.Method != http.MethodPost || string(body) != string(d.Envelope) {
		t.Fatalf("method %s body %s", got.Method, body)
	}
	want := map[string]string{
		wire.HeaderDestination: d.Destination, wire.HeaderConsumer: d.ConsumerName, wire.HeaderEventID: d.EventID,
		wire.HeaderAttemptID: d.AttemptID, wire.HeaderAttemptNumber: "3", wire.HeaderEnvelopeSHA256: d.EnvelopeSHA256,
		wire.HeaderReceiptType: d.ExpectedReceiptType, wire.HeaderReceiptSchema: "1",
		wire.HeaderProjection: "operations_timeline@1", wire.HeaderSignature: wire.SignRequest(secret, 1764600000, got.Header, body),
		"Content-Type": "application/json",
	}
	for k, v := range want {
		if g := got.Header.Get(k); g != v {
			t.Errorf("header %s = %q, want %q", k, g, v)
		}
	}
	if got.Header.Get("Authorization") != "" {
		t.Error("hmac auth must not send Authorization")
	}
	// R-SEC-5, R-DP-2: the v1 signature covers time, delivery headers and body digest.
	if g := got.Header.Get(wire.HeaderSignature); !strings.HasPrefix(g, "t=1764600000,v1=") || len(g) != len("t=1764600000,v1=")+64 {
		t.Errorf("signature format %q", g)
	}
	if ts, ok := wire.VerifyRequest(secret, got.Header, body); !ok || ts != 1764600000 {
		t.Errorf("signature does not verify (%d %v)", ts, ok)
	}
}

func TestHTTPBearerAndNoProjectionHeader(t *testing.T) {
	t.Parallel()
	var auth, proj, sig string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, proj, sig = r.Header.Get("Authorization"), r.Header.Get(wire.HeaderProjection), r.Header.Get(wire.HeaderSignature)
		w.WriteHeader(503)
	}))
	defer srv.Close()
	h, _ := NewHTTP(HTTPOptions{URL: srv.URL, Auth: config.AuthBearer, Secret: config.NewSecret([]byte("tok-0123456789abcdef"))})
	d := sampleDelivery()
	d.RequiredProjectionName, d.RequiredProjectionVersion = "", 0
	if _, err := h.Deliver(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if auth != "Bearer tok-0123456789abcdef" || proj != "" || sig != "" {
		t.Fatalf("auth %q projection %q signature %q", auth, proj, sig)
	}
}

// testCodes is test data shaped like the rows of outbox.error_codes (the dispatcher loads the
// real ones at preflight; tests/dispatcher checks that path against the database).
var testCodes = NewCodes([]pgcall.ErrorCode{
	{Code: "consumer_unavailable", Retryable: true}, {Code: "consumer_timeout", Retryable: true},
	{Code: "capacity_protection", Retryable: true}, {Code: "transport_error", Retryable: true},
	{Code: "invalid_ack", Retryable: true}, {Code: "awaiting_revision", Retryable: true},
	{Code: "database_unavailable", Retryable: true},
	{Code: "unsupported_schema"}, {Code: "unknown_event_type"}, {Code: "digest_conflict"}, {Code: "envelope_invalid"},
	{Code: "receipt_conflict"}, {Code: "consumer_rejected"}, {Code: "retry_exhausted"},
})

// testReceipts is a catalog with the broker_publication kind as the kernel registers it.
func testReceipts(t *testing.T) *receipt.Catalog {
	t.Helper()
	zero := int64(0)
	c, err := receipt.NewCatalog([]receipt.Info{{Kind: receipt.BrokerPublication, ReceiptType: "BrokerPublicationReceipt",
		Prefix: "brokerPublicationReceipt", TimeField: "publishedAt", SchemaVersion: 1, Members: []receipt.Member{
			{Name: "duplicate", JSONType: receipt.TypeBoolean, Required: true},
			{Name: "sequence", JSONType: receipt.TypeInteger, Required: true, Minimum: &zero},
			{Name: "stream", JSONType: receipt.TypeString, Required: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The response mapping of docs/transport-http.md, case by case.
func TestHTTPResponseMapping(t *testing.T) {
	t.Parallel()
	ok := `{"ack":{"destination":"d"},"receipt":{"x":1}}`
	cases := []struct {
		name   string
		status int
		body   string
		want   wire.Status
		code   string
	}{
		{"200 ack+receipt", 200, ok, wire.Acknowledged, ""},
		{"200 with whitespace", 200, " {\n\"receipt\": {}, \"ack\": {} }\n", wire.Acknowledged, ""},
		{"200 empty body", 200, ``, wire.Retryable, "invalid_ack"},
		{"200 not json", 200, `ok`, wire.Retryable, "invalid_ack"},
		{"200 ack only", 200, `{"ack":{}}`, wire.Retryable, "invalid_ack"},
		{"200 receipt only", 200, `{"receipt":{}}`, wire.Retryable, "invalid_ack"},
		{"200 ack string", 200, `{"ack":"yes","receipt":{}}`, wire.Retryable, "invalid_ack"},
		{"200 receipt null", 200, `{"ack":{},"receipt":null}`, wire.Retryable, "invalid_ack"},
		{"200 extra key", 200, `{"ack":{},"receipt":{},"status":"ok"}`, wire.Retryable, "invalid_ack"},
		{"200 array", 200, `[{"ack":{}}]`, wire.Retryable, "invalid_ack"},
		{"204 bare 2xx", 204, ``, wire.Retryable, "invalid_ack"},
		{"201 with valid body", 201, ok, wire.Retryable, "invalid_ack"},
		{"409 non-retryable", 409, `{"code":"unknown_event_type"}`, wire.NonRetryable, "unknown_event_type"},
		{"422 non-retryable", 422, `{"code":"receipt_conflict","ref":"receipt:abc"}`, wire.NonRetryable, "receipt_conflict"},
		{"409 retryable code", 409, `{"code":"awaiting_revision"}`, wire.Retryable, "consumer_unavailable"},
		{"422 unknown code", 422, `{"code":"bogus"}`, wire.Retryable, "consumer_unavailable"},
		{"409 no body", 409, ``, wire.Retryable, "consumer_unavailable"},
		{"429 retryable", 429, `{"code":"capacity_protection"}`, wire.Retryable, "capacity_protection"},
		{"503 retryable", 503, `{"code":"awaiting_revision"}`, wire.Retryable, "awaiting_revision"},
		{"503 non-retryable code", 503, `{"code":"digest_conflict"}`, wire.Retryable, "consumer_unavailable"},
		{"503 no body", 503, ``, wire.Retryable, "consumer_unavailable"},
		{"500", 500, `{"code":"consumer_rejected"}`, wire.Retryable, "consumer_unavailable"},
		{"400", 400, `{"code":"envelope_invalid"}`, wire.Retryable, "consumer_unavailable"},
		{"401", 401, ``, wire.Retryable, "consumer_unavailable"},
		{"302 not followed", 302, ``, wire.Retryable, "consumer_unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			h, _ := NewHTTP(HTTPOptions{URL: srv.URL, Timeout: 2 * time.Second})
			h.SetCodes(testCodes) // what the dispatcher's preflight hands it
			res, err := h.Deliver(context.Background(), sampleDelivery())
			if err != nil {
				t.Fatal(err)
			}
			if n := testCodes.Normalize(res); n.Status != res.Status || n.Code != res.Code {
				t.Fatalf("mapped answer %+v is not normalized (%+v)", res, n)
			}
			if res.Status != c.want || res.Code != c.code {
				t.Fatalf("got %s/%q, want %s/%q", res.Status, res.Code, c.want, c.code)
			}
			if c.want != wire.Acknowledged && (res.Ack != nil || res.Receipt != nil) {
				t.Fatal("non-success carries ack/receipt")
			}
		})
	}
}

func TestHTTPOversizedResponseIsInvalidAck(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"ack":{},"receipt":{"pad":"` + strings.Repeat("x", 4096) + `"}}`))
	}))
	defer srv.Close()
	h, _ := NewHTTP(HTTPOptions{URL: srv.URL, MaxResponseBytes: 1024})
	res, err := h.Deliver(context.Background(), sampleDelivery())
	if err != nil || res.Status != wire.Retryable || res.Code != "invalid_ack" {
		t.Fatalf("got %+v %v", res, err)
	}
}

// Network errors and timeouts are transport errors (the dispatcher retries them).
func TestHTTPTimeoutAndConnectionRefused(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	h, _ := NewHTTP(HTTPOptions{URL: srv.URL, Timeout: 150 * time.Millisecond})
	_, err := h.Deliver(context.Background(), sampleDelivery())
	var ne net.Error
	if err == nil || !(errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())) {
		t.Fatalf("want a timeout error, got %v", err)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	h2, _ := NewHTTP(HTTPOptions{URL: "http://" + addr + "/x", Timeout: time.Second})
	if _, err := h2.Deliver(context.Background(), sampleDelivery()); err == nil {
		t.Fatal("connection refused must be an error")
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   wire.Result
		want wire.Result
	}{
		{wire.Result{Status: wire.Retryable, Code: "awaiting_revision", Ref: "gap:3"}, wire.Result{Status: wire.Retryable, Code: "awaiting_revision", Ref: "gap:3"}},
		{wire.Result{Status: wire.Retryable, Code: "unknown_event_type"}, wire.Result{Status: wire.Retryable, Code: "consumer_unavailable"}},
		{wire.Result{Status: wire.NonRetryable, Code: "consumer_timeout"}, wire.Result{Status: wire.Retryable, Code: "consumer_unavailable"}},
		{wire.Result{Status: wire.NonRetryable, Code: "unsupported_schema", Ref: "payload: {secret}"}, wire.Result{Status: wire.NonRetryable, Code: "unsupported_schema"}},
		{wire.Result{Status: 0, Code: "x"}, wire.Result{Status: wire.Retryable, Code: "consumer_unavailable"}},
	}
	for _, c := range cases {
		got := testCodes.Normalize(c.in)
		if got.Status != c.want.Status || got.Code != c.want.Code || got.Ref != c.want.Ref {
			t.Errorf("Normalize(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// R-AK-1, R-AK-1a: the broker receipt built from a PubAck has exactly the contract's fields,
// its digest is jcs-sha256-v1 of the receipt minus ref, digest and publishedAt, and the ack
// refers to it with exactly the five appliedReceipt keys.
func TestBrokerReceiptShape(t *testing.T) {
	t.Parallel()
	d := sampleDelivery()
	d.Destination, d.ConsumerName = "broker_events", "jetstream_broker"
	d.ExpectedReceiptType = "BrokerPublicationReceipt"
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	if _, _, err := BrokerReceipt(nil, d, "EVENTS", 42, true, at); err == nil {
		t.Fatal("built without a catalog")
	}
	ack, receipt, err := BrokerReceipt(testReceipts(t), d, "EVENTS", 42, true, at)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(receipt, &r); err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"brokerPublicationReceiptRef", "brokerPublicationReceiptSchemaVersion",
		"brokerPublicationReceiptDigestAlgorithmVersion", "brokerPublicationReceiptDigest", "destination",
		"consumerName", "eventId", "eventEnvelopeDigestAlgorithmVersion", "eventEnvelopeSha256", "publishedAt",
		"stream", "sequence", "duplicate"}
	if len(r) != len(wantKeys) {
		t.Fatalf("receipt keys: %v", r)
	}
	for _, k := range wantKeys {
		if _, ok := r[k]; !ok {
			t.Fatalf("receipt lacks %s", k)
		}
	}
	if r["publishedAt"] != "2026-01-02T02:04:05.123456Z" || r["brokerPublicationReceiptRef"] != "EVENTS:42" ||
		r["sequence"] != float64(42) || r["duplicate"] != true || r["stream"] != "EVENTS" {
		t.Fatalf("receipt values: %v", r)
	}
	cand := map[string]any{}
	for k, v := range r {
		if k != "brokerPublicationReceiptRef" && k != "brokerPublicationReceiptDigest" && k != "publishedAt" {
			cand[k] = v
		}
	}
	dg, _ := canon.Digest(cand)
	if r["brokerPublicationReceiptDigest"] != dg {
		t.Fatalf("digest %v, recomputed %s", r["brokerPublicationReceiptDigest"], dg)
	}
	var a map[string]any
	_ = json.Unmarshal(ack, &a)
	if len(a) != 6 || a["eventId"] != d.EventID || a["destination"] != d.Destination {
		t.Fatalf("ack: %v", a)
	}
	ar := a["appliedReceipt"].(map[string]any)
	if len(ar) != 5 || ar["kind"] != "broker_publication" || ar["brokerPublicationReceiptDigest"] != dg ||
		ar["brokerPublicationReceiptRef"] != "EVENTS:42" {
		t.Fatalf("appliedReceipt: %v", ar)
	}
	if c, _ := canon.Canonicalize(receipt); string(c) != string(receipt) {
		t.Fatal("receipt not canonical")
	}
	if _, _, err := BrokerReceipt(testReceipts(t), d, "EVENTS", 1<<60, false, at); err == nil {
		t.Fatal("unsafe sequence accepted")
	}
}

func TestInProcess(t *testing.T) {
	t.Parallel()
	p := NewInProcess(map[string]wire.Consumer{"a": Func(func(ctx context.Context, d wire.Delivery) (wire.Result, error) {
		return wire.Result{Status: wire.Retryable, Code: "awaiting_revision"}, nil
	})})
	d := sampleDelivery()
	d.Destination = "a"
	if r, err := p.Deliver(context.Background(), d); err != nil || r.Code != "awaiting_revision" {
		t.Fatal(r, err)
	}
	d.Destination = "b"
	if _, err := p.Deliver(context.Background(), d); !errors.Is(err, ErrNoConsumer) {
		t.Fatal(err)
	}
}

// Issue 21 item 1 (keep-alive): deliveries reuse their connections. 8 deliveries at a time, 200
// in all, to one destination open at most 8 connections (one per request in flight), not one
// per delivery.
func TestHTTPReusesConnections(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	opened := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"ack":{"a":1},"receipt":{"r":2}}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	const inFlight, total = 8, 200
	h, err := NewHTTP(HTTPOptions{URL: srv.URL, Timeout: 5 * time.Second, Auth: config.AuthBearer,
		Secret: config.NewSecret([]byte("0123456789abcdef0123")), MaxInFlight: inFlight})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for w := 0; w < inFlight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < total/inFlight; i++ {
				res, err := h.Deliver(context.Background(), sampleDelivery())
				if err == nil && res.Status != wire.Acknowledged {
					err = errors.New("not acknowledged")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if opened > inFlight {
		t.Fatalf("%d deliveries (%d at a time) opened %d connections; want at most %d (keep-alive reuse)", total, inFlight, opened, inFlight)
	}
}

// R-AK-7: an error answer's code is usable only when the codes loaded from outbox.error_codes
// class it like the status; otherwise the answer is retryable consumer_unavailable with the
// status as its ref. Without loaded codes the status gives the class (the dispatcher's
// Normalize, with the table's codes, then refuses an unknown one).
func TestMapHTTPResponseUsesLoadedCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		body   string
		codes  *Codes
		want   wire.Result
	}{
		{409, `{"code":"consumer_rejected","ref":"bug:1"}`, testCodes, wire.Result{Status: wire.NonRetryable, Code: "consumer_rejected", Ref: "bug:1"}},
		{409, `{"code":"bogus","ref":"bug:1"}`, testCodes, wire.Result{Status: wire.Retryable, Code: "consumer_unavailable", Ref: "http:status_409"}},
		{503, `{"code":"retry_exhausted"}`, testCodes, wire.Result{Status: wire.Retryable, Code: "consumer_unavailable", Ref: "http:status_503"}},
		{409, `{"code":"consumer_rejected"}`, nil, wire.Result{Status: wire.NonRetryable, Code: "consumer_rejected"}},
		{429, `{"code":"bogus"}`, nil, wire.Result{Status: wire.Retryable, Code: "bogus"}},
		{429, ``, nil, wire.Result{Status: wire.Retryable, Code: "consumer_unavailable", Ref: "http:status_429"}},
		{409, `{"code":"shelf_gone"}`, NewCodes([]pgcall.ErrorCode{{Code: "shelf_gone"}}), wire.Result{Status: wire.NonRetryable, Code: "shelf_gone"}},
	}
	for _, c := range cases {
		got := MapHTTPResponse(c.status, []byte(c.body), c.codes)
		if got.Status != c.want.Status || got.Code != c.want.Code || got.Ref != c.want.Ref {
			t.Errorf("%d %s (codes %v): %+v, want %+v", c.status, c.body, c.codes != nil, got, c.want)
		}
	}
}
