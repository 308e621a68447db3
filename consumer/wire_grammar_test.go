package consumer

// Issue 21 item 5: every rule of docs/transport-http.md "Header grammar", "Absent and empty
// headers", "Replay window" and "400 or 401" has a test here. "Accepted" shows as 422
// unknown_event_type (authenticated, headers read, the kit's own checks ran, no database).

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/wire"
)

type wireFixture struct {
	t   *testing.T
	c   *Consumer
	cfg Config
	d   wire.Delivery
	now time.Time
}

func newWireFixture(t *testing.T, edit func(*Config)) *wireFixture {
	now := time.Unix(1764600000, 0)
	cfg := testConfig(t)
	cfg.Now = func() time.Time { return now }
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv()
	env["eventType"] = "run.created@2.0"
	d := testDelivery(t, env)
	d.AttemptID, d.AttemptNumber = "5d7c0e0a-1111-4c1e-9a55-6f0e2f1d9a01", 1
	return &wireFixture{t: t, c: c, cfg: cfg, d: d, now: now}
}

// request builds the dispatcher's request; edit changes the headers BEFORE signing (so the
// signature covers them as sent) unless sig is given.
func (f *wireFixture) request(edit func(h http.Header), ts int64, sig string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(f.d.Envelope))
	wire.SetHeaders(req.Header, f.d)
	if edit != nil {
		edit(req.Header)
	}
	if sig == "" {
		sig = wire.SignRequest(f.cfg.HMACSecret, ts, req.Header, f.d.Envelope)
	}
	req.Header.Set(wire.HeaderSignature, sig)
	return req
}

func (f *wireFixture) want(name string, req *http.Request, status int, code string) {
	f.t.Helper()
	s, e := serve(f.c, req)
	if s != status || (code != "" && e.Code != code) {
		f.t.Errorf("%s: %d %+v, want %d %s", name, s, e, status, code)
	}
}

// Header grammar: the signature value is exactly "t=" 1*12DIGIT ",v1=" 64 lower-case hex; any
// other spelling is malformed (401) — upper-case hex, spaces, other order, extra parameters, a
// sign, a second Pgoutbox-Signature header.
func TestWireSignatureGrammar(t *testing.T) {
	f := newWireFixture(t, nil)
	ts := f.now.Unix()
	good := f.request(nil, ts, "").Header.Get(wire.HeaderSignature)
	f.want("well-formed", f.request(nil, ts, good), http.StatusUnprocessableEntity, CodeUnknownEventType)
	mac := strings.TrimPrefix(good, "t="+itoa(ts)+",v1=")
	for name, sig := range map[string]string{
		"upper-case hex":    "t=" + itoa(ts) + ",v1=" + strings.ToUpper(mac),
		"space after comma": "t=" + itoa(ts) + ", v1=" + mac,
		"v1 first":          "v1=" + mac + ",t=" + itoa(ts),
		"extra parameter":   good + ",v0=00",
		"signed timestamp":  "t=+" + itoa(ts) + ",v1=" + mac,
		"13 digits":         "t=0" + itoa(ts) + "00,v1=" + mac,
		"short mac":         "t=" + itoa(ts) + ",v1=" + mac[:62],
	} {
		f.want(name, f.request(nil, ts, sig), http.StatusUnauthorized, "unauthorized")
	}
	twice := f.request(nil, ts, good)
	twice.Header.Add(wire.HeaderSignature, good)
	f.want("two signature headers", twice, http.StatusUnauthorized, "unauthorized")
}

// Header grammar of the delivery headers, authenticated: numbers are 1*DIGIT; each header at
// most once; the four required ones non-empty; Required-Projection splits at its last "@".
func TestWireDeliveryHeaderGrammar(t *testing.T) {
	f := newWireFixture(t, func(c *Config) { c.ProjectionName, c.ProjectionVersion = "ops@timeline", 2 })
	ts := f.now.Unix()
	i := 0
	next := func(edit func(h http.Header)) *http.Request {
		i++ // a new attempt each time: never a replay
		return f.request(func(h http.Header) {
			h.Set(wire.HeaderAttemptID, "5d7c0e0a-"+itoa(int64(1000+i))+"-4c1e-9a55-6f0e2f1d9a01")
			edit(h)
		}, ts, "")
	}
	f.want("projection name with @", next(func(h http.Header) { h.Set(wire.HeaderProjection, "ops@timeline@2") }), http.StatusUnprocessableEntity, CodeUnknownEventType)
	f.want("leading zeros", next(func(h http.Header) { h.Set(wire.HeaderAttemptNumber, "007") }), http.StatusUnprocessableEntity, CodeUnknownEventType)
	for name, edit := range map[string]func(h http.Header){
		"signed attempt number": func(h http.Header) { h.Set(wire.HeaderAttemptNumber, "+1") },
		"negative schema":       func(h http.Header) { h.Set(wire.HeaderReceiptSchema, "-1") },
		"spaced number":         func(h http.Header) { h.Set(wire.HeaderAttemptNumber, " 1") },
		"projection no version": func(h http.Header) { h.Set(wire.HeaderProjection, "ops@timeline@") },
		"projection no name":    func(h http.Header) { h.Set(wire.HeaderProjection, "@2") },
		"projection without @":  func(h http.Header) { h.Set(wire.HeaderProjection, "ops") },
		"destination twice":     func(h http.Header) { h.Add(wire.HeaderDestination, "other") },
		"missing event id":      func(h http.Header) { h.Del(wire.HeaderEventID) },
		"empty consumer":        func(h http.Header) { h.Set(wire.HeaderConsumer, "") },
		"missing destination":   func(h http.Header) { h.Del(wire.HeaderDestination) },
	} {
		f.want(name, next(edit), http.StatusBadRequest, "bad_request")
	}
}

// Absent and empty headers: an empty optional header is the same as an absent one — it signs
// as the same empty line, and means the same (no projection, no attempt number, no expected
// receipt contract). For a consumer without projection both pass; a non-empty projection the
// consumer does not build is unsupported_schema (projection_target).
func TestWireAbsentAndEmptyHeaders(t *testing.T) {
	f := newWireFixture(t, nil)
	ts := f.now.Unix()
	absent := f.request(func(h http.Header) { h.Del(wire.HeaderProjection) }, ts, "")
	empty := f.request(func(h http.Header) { h.Set(wire.HeaderProjection, "") }, ts, "")
	if absent.Header.Get(wire.HeaderSignature) != empty.Header.Get(wire.HeaderSignature) {
		t.Fatal("an empty Required-Projection signs differently from an absent one")
	}
	f.want("projection absent", absent, http.StatusUnprocessableEntity, CodeUnknownEventType)
	emptyNext := f.request(func(h http.Header) {
		h.Set(wire.HeaderProjection, "")
		h.Set(wire.HeaderAttemptID, "5d7c0e0a-2222-4c1e-9a55-6f0e2f1d9a01")
	}, ts, "")
	f.want("projection empty", emptyNext, http.StatusUnprocessableEntity, CodeUnknownEventType)
	for name, hdr := range map[string]string{"attempt number": wire.HeaderAttemptNumber, "receipt type": wire.HeaderReceiptType,
		"receipt schema": wire.HeaderReceiptSchema, "attempt id": wire.HeaderAttemptID} {
		f.want(name+" empty", f.request(func(h http.Header) {
			h.Set(hdr, "")
			if hdr != wire.HeaderAttemptID {
				h.Set(wire.HeaderAttemptID, "5d7c0e0a-3333-4c1e-9a55-"+strings.Repeat("0", 8)+itoa(int64(len(name)))[:1]+"bbb")
			}
		}, ts, ""), http.StatusUnprocessableEntity, CodeUnknownEventType)
	}
	other := f.request(func(h http.Header) {
		h.Set(wire.HeaderProjection, "operations_timeline@1")
		h.Set(wire.HeaderAttemptID, "5d7c0e0a-4444-4c1e-9a55-6f0e2f1d9a01")
	}, ts, "")
	f.want("projection the consumer does not build", other, http.StatusUnprocessableEntity, CodeUnsupportedSchema)
}

// Replay window: a timestamp t is fresh when now − window ≤ t ≤ now + window (both ends
// inclusive, whole seconds of the consumer's clock); an accepted signature is refused as a
// replay while now ≤ t + window (inclusive) and accepted again after — by then it is stale
// anyway. The memory is the Consumer's (one process): another instance or a restart does not
// share it.
func TestWireReplayWindowBoundary(t *testing.T) {
	f := newWireFixture(t, func(c *Config) { c.SignatureWindow = 60 * time.Second })
	now := f.now.Unix()
	n := 0
	at := func(ts int64) *http.Request {
		n++
		return f.request(func(h http.Header) { h.Set(wire.HeaderAttemptNumber, itoa(int64(n))) }, ts, "")
	}
	f.want("t = now - window", at(now-60), http.StatusUnprocessableEntity, CodeUnknownEventType)
	f.want("t = now + window", at(now+60), http.StatusUnprocessableEntity, CodeUnknownEventType)
	f.want("t = now - window - 1", at(now-61), http.StatusUnauthorized, "unauthorized")
	f.want("t = now + window + 1", at(now+61), http.StatusUnauthorized, "unauthorized")

	// Replay memory up to t + window inclusive, on this instance only.
	first := f.request(func(h http.Header) { h.Set(wire.HeaderAttemptNumber, "99") }, now, "")
	sig := first.Header.Get(wire.HeaderSignature)
	f.want("first use", first, http.StatusUnprocessableEntity, CodeUnknownEventType)
	replay := func() *http.Request {
		return f.request(func(h http.Header) { h.Set(wire.HeaderAttemptNumber, "99") }, now, sig)
	}
	f.now = time.Unix(now+60, 0)
	f.cfg.Now = func() time.Time { return f.now }
	f.c.cfg.Now = f.cfg.Now
	if s, e := serve(f.c, replay()); s != http.StatusUnauthorized || e.Ref != "replayed_signature" {
		t.Fatalf("replay at t + window: %d %+v, want 401 replayed_signature", s, e)
	}
	other, err := New(context.Background(), f.cfg) // another instance (or a restart) does not know it
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := serve(other, replay()); s != http.StatusUnprocessableEntity {
		t.Fatalf("another instance: %d, want 422 (replay memory is per instance)", s)
	}
	f.c.cfg.Now = func() time.Time { return time.Unix(now+61, 0) }
	if s, e := serve(f.c, replay()); s != http.StatusUnauthorized || e.Ref != "stale_signature" {
		t.Fatalf("after t + window: %d %+v, want 401 stale_signature", s, e)
	}
}

// 400 or 401: authentication is decided first, from the signature (or token) alone. Without a
// valid one the answer is 401 whatever else is wrong (even with every delivery header missing);
// with a valid one a missing or malformed delivery header is 400. The signature covers absent
// headers as empty lines, so a request signed without a header verifies and is then 400; one
// whose header is removed after signing does not verify (401).
func TestWire400Versus401(t *testing.T) {
	f := newWireFixture(t, nil)
	ts := f.now.Unix()
	noHeaders := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(f.d.Envelope))
	f.want("no signature, no delivery headers", noHeaders, http.StatusUnauthorized, "unauthorized")
	noSig := f.request(nil, ts, "")
	noSig.Header.Del(wire.HeaderSignature)
	f.want("delivery headers, no signature", noSig, http.StatusUnauthorized, "unauthorized")
	f.want("signed without Event-Id", f.request(func(h http.Header) { h.Del(wire.HeaderEventID) }, ts, ""), http.StatusBadRequest, "bad_request")
	// The v1 MAC is checked over the claimed envelope digest standing for the body's: without
	// that header the request cannot authenticate (401, not 400).
	f.want("signed without Envelope-Sha256", f.request(func(h http.Header) { h.Del(wire.HeaderEnvelopeSHA256) }, ts, ""), http.StatusUnauthorized, "unauthorized")
	removed := f.request(func(h http.Header) { h.Set(wire.HeaderAttemptNumber, "5") }, ts, "")
	removed.Header.Del(wire.HeaderEventID)
	f.want("Event-Id removed after signing", removed, http.StatusUnauthorized, "unauthorized")
}
