package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/wire"
)

// signedRequest builds the request the dispatcher sends for d, signed with the v1 scheme at ts.
func signedRequest(d wire.Delivery, secret []byte, ts int64) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(d.Envelope))
	wire.SetHeaders(req.Header, d)
	req.Header.Set(wire.HeaderSignature, wire.SignRequest(secret, ts, req.Header, d.Envelope))
	return req
}

func serve(h http.Handler, req *http.Request) (int, wire.HTTPErrorBody) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var e wire.HTTPErrorBody
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	return w.Code, e
}

// R-SEC-5, R-DP-2 (issue 11 finding 9): the v1 signature covers timestamp, delivery headers and
// body digest; the kit accepts a fresh one once, refuses the same request replayed within the
// window, refuses a stale or future timestamp outside the window, refuses a signature moved to
// another attempt or destination, and accepts the obsolete body-only form only when configured.
// "Accepted" shows as 422 unknown_event_type: authentication passed and the kit's own checks ran
// (the event type is deliberately one the consumer does not know, so no database is needed).
func TestHTTPSignatureFreshReplayedStale(t *testing.T) {
	now := time.Unix(1764600000, 0)
	cfg := testConfig(t)
	cfg.Now = func() time.Time { return now }
	cfg.SignatureWindow = 5 * time.Minute
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv()
	env["eventType"] = "run.created@2.0"
	d := testDelivery(t, env)
	d.AttemptID, d.AttemptNumber = "5d7c0e0a-1111-4c1e-9a55-6f0e2f1d9a01", 1

	fresh := signedRequest(d, cfg.HMACSecret, now.Unix()-10)
	replay := signedRequest(d, cfg.HMACSecret, now.Unix()-10) // byte-identical capture of fresh
	if s, e := serve(c, fresh); s != http.StatusUnprocessableEntity || e.Code != CodeUnknownEventType {
		t.Fatalf("fresh: %d %+v, want 422 unknown_event_type (authenticated)", s, e)
	}
	if s, e := serve(c, replay); s != http.StatusUnauthorized || e.Ref != "replayed_signature" {
		t.Fatalf("replayed: %d %+v, want 401 replayed_signature", s, e)
	}
	// Still refused later inside the window, and with the body arriving again.
	now = now.Add(4 * time.Minute)
	if s, e := serve(c, signedRequest(d, cfg.HMACSecret, now.Add(-4*time.Minute).Unix()-10)); s != http.StatusUnauthorized || e.Ref != "replayed_signature" {
		t.Fatalf("replayed later: %d %+v", s, e)
	}
	for name, ts := range map[string]int64{
		"stale":  now.Add(-5*time.Minute).Unix() - 1,
		"future": now.Add(5*time.Minute).Unix() + 1,
	} {
		if s, e := serve(c, signedRequest(d, cfg.HMACSecret, ts)); s != http.StatusUnauthorized || e.Ref != "stale_signature" {
			t.Fatalf("%s: %d %+v, want 401 stale_signature", name, s, e)
		}
	}
	// A captured signature moved to another attempt or destination does not verify.
	for name, edit := range map[string]func(h http.Header){
		"attempt id":     func(h http.Header) { h.Set(wire.HeaderAttemptID, "5d7c0e0a-2222-4c1e-9a55-6f0e2f1d9a01") },
		"attempt number": func(h http.Header) { h.Set(wire.HeaderAttemptNumber, "2") },
		"destination":    func(h http.Header) { h.Set(wire.HeaderDestination, "core_operations") },
	} {
		req := signedRequest(d, cfg.HMACSecret, now.Unix())
		edit(req.Header)
		if s, _ := serve(c, req); s != http.StatusUnauthorized {
			t.Fatalf("signature moved to another %s: %d, want 401", name, s)
		}
	}
	// A new attempt (new id, new timestamp) of the same event passes.
	d.AttemptID, d.AttemptNumber = "5d7c0e0a-3333-4c1e-9a55-6f0e2f1d9a01", 2
	if s, e := serve(c, signedRequest(d, cfg.HMACSecret, now.Unix())); s != http.StatusUnprocessableEntity {
		t.Fatalf("next attempt: %d %+v, want 422", s, e)
	}
	// The obsolete body-only form: refused by default, accepted behind the switch.
	legacy := func() *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(d.Envelope))
		wire.SetHeaders(req.Header, d)
		req.Header.Set(wire.HeaderSignature, wire.Sign(cfg.HMACSecret, d.Envelope))
		return req
	}
	if s, _ := serve(c, legacy()); s != http.StatusUnauthorized {
		t.Fatalf("body-only by default: %d, want 401", s)
	}
	cfg.AcceptBodyOnlySignature = true
	lc, _ := New(context.Background(), cfg)
	if s, _ := serve(lc, legacy()); s != http.StatusUnprocessableEntity {
		t.Fatalf("body-only behind the switch: %d, want 422", s)
	}
	if st := c.HTTPStats(); st.ReplayedSignatures != 2 || st.StaleSignatures != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// slowBody is a request body the test releases: it blocks until fill is called, then yields n
// bytes.
type slowBody struct {
	release chan struct{}
	r       io.Reader
}

func (b *slowBody) Read(p []byte) (int, error) {
	<-b.release
	return b.r.Read(p)
}

// Issue 11 finding 4 (R-SEC-5): the kit never reads more than MaxUnauthenticatedReads bodies at
// once before their sender is authenticated (only the body-only signature needs the body before
// that, issue 26); a v1 signature that does not verify and a bearer request with a wrong token
// are refused without reading their body at all; a declared length over MaxBodyBytes is refused
// unread. Real concurrent requests over a real server; the assertions are on counts and outcomes
// only (stall eviction and read deadlines are pushed out of the way here; the stall tests in
// tests/consumer/consumer_http_stall_test.go exercise them).
func TestHTTPUnauthenticatedReadsBounded(t *testing.T) {
	const limit, n, size = 2, 8, 4 << 20
	cfg := testConfig(t)
	cfg.BearerToken = "the-right-token-0123456789"
	cfg.MaxUnauthenticatedReads = limit
	cfg.MaxBodyBytes = size
	cfg.AcceptBodyOnlySignature = true
	cfg.UnauthenticatedStall, cfg.UnauthenticatedReadGrace = time.Hour, time.Hour
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	d := testDelivery(t, testEnv())
	d.AttemptID, d.AttemptNumber = "5d7c0e0a-1111-4c1e-9a55-6f0e2f1d9a01", 1

	post := func(body io.Reader, length int64, hdr http.Header) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, body)
		req.ContentLength = length
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// n requests with well-formed body-only signatures that do not verify (an attacker without
	// the secret), each with a 4 MiB body held back until the test releases it.
	release := make(chan struct{})
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := 0; i < n; i++ {
		hdr := http.Header{}
		wire.SetHeaders(hdr, d)
		hdr.Set(wire.HeaderAttemptNumber, strconv.Itoa(i+1))
		hdr.Set(wire.HeaderSignature, wire.Sign([]byte("not-the-secret"), nil))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses[i], _ = post(&slowBody{release, bytes.NewReader(make([]byte, size))}, size, hdr)
		}(i)
	}
	// State, not timing: all n requests reach the handler; exactly `limit` are reading, the rest wait.
	deadline := time.Now().Add(30 * time.Second)
	for st := c.HTTPStats(); st.UnauthenticatedReading != limit || st.UnauthenticatedWaiting != n-limit; st = c.HTTPStats() {
		if time.Now().After(deadline) {
			t.Fatalf("never reached %d reading / %d waiting: %+v", limit, n-limit, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusUnauthorized {
			t.Fatalf("request %d: status %d, want 401", i, s)
		}
	}
	st := c.HTTPStats()
	if st.PeakUnauthenticatedReading != limit || st.UnauthenticatedReading != 0 || st.UnauthenticatedWaiting != 0 {
		t.Fatalf("stats %+v: peak must equal the limit %d", st, limit)
	}
	if st.UnauthenticatedBytes != n*size {
		t.Fatalf("unauthenticated bytes %d, want %d", st.UnauthenticatedBytes, n*size)
	}

	// Wrong bearer token and no signature, or a fresh v1 signature that does not verify:
	// refused from the headers, nothing read.
	before := c.HTTPStats().UnauthenticatedBytes
	var wg2 sync.WaitGroup
	for i := 0; i < 2*n; i++ {
		hdr := http.Header{}
		wire.SetHeaders(hdr, d)
		if i%2 == 0 {
			hdr.Set("Authorization", "Bearer wrong-token")
		} else {
			hdr.Set(wire.HeaderSignature, wire.SignRequest([]byte("not-the-secret"), time.Now().Unix(), hdr, nil))
		}
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			// The server may close before the client finishes sending; only the server's count matters.
			if s, err := post(bytes.NewReader(make([]byte, size)), size, hdr); err == nil && s != http.StatusUnauthorized {
				t.Errorf("wrong bearer: status %d, want 401", s)
			}
		}()
	}
	wg2.Wait()
	// A declared length over the cap: 413 before any read.
	hdr := http.Header{}
	wire.SetHeaders(hdr, d)
	hdr.Set("Authorization", "Bearer "+cfg.BearerToken)
	if s, err := post(bytes.NewReader(make([]byte, size+1)), size+1, hdr); err == nil && s != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the cap: %d, want 413", s)
	}
	if st := c.HTTPStats(); st.UnauthenticatedBytes != before || st.PeakUnauthenticatedReading != limit || st.RefusedUnread < 2*n {
		t.Fatalf("header refusals read bodies: %+v", st)
	}
}
