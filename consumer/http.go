package consumer

import (
	"bytes"
	"crypto/hmac"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oceanway/pgoutbox/wire"
)

// ServeHTTP speaks the HTTP wire contract (docs/transport-http.md): POST, body = the canonical
// envelope bytes, delivery fields in the wire.Header* headers, authenticated by
// "Authorization: Bearer" (checked before the body is read) or by wire.HeaderSignature, the v1
// HMAC over timestamp, delivery headers and body digest (wire.SigningString): its timestamp must
// lie within SignatureWindow and the signature must not have been seen before (R-SEC-5, R-DP-2).
// Answers: 200 wire.HTTPSuccessBody{ack, receipt}; 422 (409 for receipt_conflict)
// wire.HTTPErrorBody for non-retryable codes; 503 (429 for capacity_protection) for retryable
// ones; 401 when authentication fails (nothing is applied; code unauthorized, ref
// stale_signature | replayed_signature when that is why); 413 for a body over MaxBodyBytes;
// 400 for a malformed request.
func (c *Consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, wire.HTTPErrorBody{Code: "method_not_allowed"})
		return
	}
	if r.ContentLength > c.cfg.MaxBodyBytes {
		writeJSON(w, http.StatusRequestEntityTooLarge, wire.HTTPErrorBody{Code: "body_too_large"})
		return
	}
	body, refusal, status := c.authenticate(w, r)
	if status != 0 {
		if status == http.StatusUnauthorized {
			c.log.Warn("http delivery refused: authentication failed", "remote", r.RemoteAddr, "reason", refusal)
			writeJSON(w, status, wire.HTTPErrorBody{Code: "unauthorized", Ref: refusal})
			return
		}
		writeJSON(w, status, wire.HTTPErrorBody{Code: refusal})
		return
	}
	d, ok := deliveryFromHeaders(r.Header)
	if !ok {
		writeJSON(w, http.StatusBadRequest, wire.HTTPErrorBody{Code: "bad_request", Ref: "headers"})
		return
	}
	d.Envelope = body
	res, _ := c.Deliver(r.Context(), d)
	switch res.Status {
	case wire.Acknowledged:
		writeJSON(w, http.StatusOK, wire.HTTPSuccessBody{Ack: res.Ack, Receipt: res.Receipt})
	case wire.NonRetryable:
		status := http.StatusUnprocessableEntity
		if res.Code == CodeReceiptConflict {
			status = http.StatusConflict
		}
		writeJSON(w, status, wire.HTTPErrorBody{Code: res.Code, Ref: res.Ref})
	default:
		status := http.StatusServiceUnavailable
		if res.Code == CodeCapacityProtection {
			status = http.StatusTooManyRequests
		}
		writeJSON(w, status, wire.HTTPErrorBody{Code: res.Code, Ref: res.Ref})
	}
}

// authenticate returns the request body of an authenticated request, or a refusal (ref or
// code) with its status. Nothing of the body is read for a request that can be refused from
// its headers alone: a matching bearer token authenticates before the read; a missing,
// malformed, stale or already seen signature refuses before it. Only a well-formed, fresh, new
// v1 signature (or, when allowed, a body-only one) needs the body, read in one of
// MaxUnauthenticatedReads slots.
func (c *Consumer) authenticate(w http.ResponseWriter, r *http.Request) ([]byte, string, int) {
	if c.cfg.BearerToken != "" {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok &&
			subtle.ConstantTimeCompare([]byte(tok), []byte(c.cfg.BearerToken)) == 1 {
			return c.readBody(w, r)
		}
	}
	if len(c.cfg.HMACSecret) == 0 {
		if c.cfg.BearerToken == "" && c.cfg.InsecureNoAuth {
			return c.readBody(w, r)
		}
		return nil, "", http.StatusUnauthorized
	}
	sig := r.Header.Get(wire.HeaderSignature)
	ts, mac, v1 := wire.ParseSignature(sig)
	bodyOnly := !v1 && c.cfg.AcceptBodyOnlySignature && strings.HasPrefix(sig, "sha256=")
	if !v1 && !bodyOnly {
		return nil, "", http.StatusUnauthorized
	}
	now := c.cfg.Now().Unix()
	window := int64(c.cfg.SignatureWindow / time.Second)
	var key [32]byte
	if v1 {
		if ts < now-window || ts > now+window {
			c.stats.stale.Add(1)
			return nil, "stale_signature", http.StatusUnauthorized
		}
		copy(key[:], mac)
		if c.replay.has(key, now) {
			c.stats.replayed.Add(1)
			return nil, "replayed_signature", http.StatusUnauthorized
		}
	}
	// The signature covers the body: read it, bounded, before knowing who sent it.
	c.stats.waiting.Add(1)
	select {
	case c.unauthSem <- struct{}{}:
		c.stats.waiting.Add(-1)
	case <-r.Context().Done():
		c.stats.waiting.Add(-1)
		return nil, "", http.StatusUnauthorized
	}
	n := c.stats.reading.Add(1)
	for p := c.stats.peak.Load(); n > p && !c.stats.peak.CompareAndSwap(p, n); p = c.stats.peak.Load() {
	}
	body, refusal, status := c.readBody(w, r)
	c.stats.bytes.Add(int64(len(body)))
	c.stats.reading.Add(-1)
	<-c.unauthSem
	if status != 0 {
		return nil, refusal, status
	}
	if bodyOnly {
		if !validBodySignature(c.cfg.HMACSecret, body, sig) {
			return nil, "", http.StatusUnauthorized
		}
		return body, "", 0
	}
	if !hmac.Equal(mac, wire.RequestMAC(c.cfg.HMACSecret, ts, r.Header, body)) {
		return nil, "", http.StatusUnauthorized
	}
	// Remembered until it would be stale anyway; a second use within the window is a replay.
	if !c.replay.add(key, ts+window, now) {
		c.stats.replayed.Add(1)
		return nil, "replayed_signature", http.StatusUnauthorized
	}
	return body, "", 0
}

func (c *Consumer) readBody(w http.ResponseWriter, r *http.Request) ([]byte, string, int) {
	// One buffer of the declared length (checked against MaxBodyBytes before any read), not
	// io.ReadAll's doubling with its garbage copies.
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, c.cfg.MaxBodyBytes))
	body := buf.Bytes()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, "body_too_large", http.StatusRequestEntityTooLarge
		}
		return nil, "bad_request", http.StatusBadRequest
	}
	return body, "", 0
}

// Sign returns the obsolete body-only wire.HeaderSignature value for body under secret
// (accepted only with Config.AcceptBodyOnlySignature). Use wire.SignRequest.
func Sign(secret, body []byte) string { return wire.Sign(secret, body) }

func validBodySignature(secret, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	return hmac.Equal(got, wire.BodyMAC(secret, body))
}

// replayCache remembers accepted v1 signatures until their timestamp + window (R-SEC-5). Only
// signatures that verified are added, so its size is bounded by the legitimate request rate
// times twice the window; expired entries are swept at most once a second.
type replayCache struct {
	mu        sync.Mutex
	seen      map[[32]byte]int64 // MAC -> unix second after which it is stale anyway
	lastSweep int64
}

func (rc *replayCache) has(k [32]byte, now int64) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	exp, ok := rc.seen[k]
	return ok && exp >= now
}

// add records k; false when it was already there (a replay).
func (rc *replayCache) add(k [32]byte, expires, now int64) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if now != rc.lastSweep {
		rc.lastSweep = now
		for key, exp := range rc.seen {
			if exp < now {
				delete(rc.seen, key)
			}
		}
	}
	if exp, ok := rc.seen[k]; ok && exp >= now {
		return false
	}
	rc.seen[k] = expires
	return true
}

type httpCounters struct {
	reading, waiting, peak, bytes, stale, replayed atomic.Int64
}

// HTTPStats counts what the HTTP handler did before authentication (finding: unauthenticated
// bodies must be bounded).
type HTTPStats struct {
	// UnauthenticatedReading: bodies being read now before their signature is checked;
	// UnauthenticatedWaiting: requests waiting for a read slot; PeakUnauthenticatedReading: the
	// most read at once so far (never above Config.MaxUnauthenticatedReads).
	UnauthenticatedReading, UnauthenticatedWaiting, PeakUnauthenticatedReading int64
	// UnauthenticatedBytes: body bytes read before authentication, in total.
	UnauthenticatedBytes int64
	// StaleSignatures, ReplayedSignatures: requests refused for those reasons.
	StaleSignatures, ReplayedSignatures int64
}

// HTTPStats returns the handler's counters.
func (c *Consumer) HTTPStats() HTTPStats {
	return HTTPStats{
		UnauthenticatedReading: c.stats.reading.Load(), UnauthenticatedWaiting: c.stats.waiting.Load(),
		PeakUnauthenticatedReading: c.stats.peak.Load(), UnauthenticatedBytes: c.stats.bytes.Load(),
		StaleSignatures: c.stats.stale.Load(), ReplayedSignatures: c.stats.replayed.Load(),
	}
}

func deliveryFromHeaders(h http.Header) (wire.Delivery, bool) {
	d := wire.Delivery{
		Destination:                    h.Get(wire.HeaderDestination),
		ConsumerName:                   h.Get(wire.HeaderConsumer),
		EventID:                        h.Get(wire.HeaderEventID),
		AttemptID:                      h.Get(wire.HeaderAttemptID),
		EnvelopeSHA256:                 h.Get(wire.HeaderEnvelopeSHA256),
		ExpectedReceiptType:            h.Get(wire.HeaderReceiptType),
		EnvelopeDigestAlgorithmVersion: "jcs-sha256-v1",
	}
	if d.Destination == "" || d.ConsumerName == "" || d.EventID == "" || d.EnvelopeSHA256 == "" {
		return d, false
	}
	var err error
	if v := h.Get(wire.HeaderAttemptNumber); v != "" {
		if d.AttemptNumber, err = strconv.Atoi(v); err != nil {
			return d, false
		}
	}
	if v := h.Get(wire.HeaderReceiptSchema); v != "" {
		if d.ExpectedReceiptSchemaVersion, err = strconv.Atoi(v); err != nil {
			return d, false
		}
	}
	if v := h.Get(wire.HeaderProjection); v != "" {
		i := strings.LastIndexByte(v, '@')
		if i <= 0 {
			return d, false
		}
		d.RequiredProjectionName = v[:i]
		if d.RequiredProjectionVersion, err = strconv.Atoi(v[i+1:]); err != nil {
			return d, false
		}
	}
	return d, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"code":"consumer_unavailable"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
