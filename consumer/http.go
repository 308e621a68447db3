package consumer

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
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
		if status == http.StatusUnauthorized || status == http.StatusRequestTimeout {
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
	d.TraceParent, d.TraceState = traceHeaders(r.Header)
	ctx, span := handlingSpan(r.Context(), d)
	res, _ := c.Deliver(ctx, d)
	endHandlingSpan(span, res)
	switch res.Status {
	case wire.Acknowledged:
		writeSuccess(w, res.Ack, res.Receipt)
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
// code) with its status. A v1 signature and a bearer token authenticate from the headers alone,
// before any body byte is read: the v1 MAC is checked with the claimed envelope digest
// (wire.HeaderEnvelopeSHA256) standing for the body digest — the dispatcher's body is exactly the
// canonical envelope of that digest — and the body, read afterwards, must hash to it. A missing,
// malformed, stale, replayed or wrong signature is refused unread. Only the obsolete body-only
// form (AcceptBodyOnlySignature) needs the body before its sender is known; it is read in one of
// MaxUnauthenticatedReads slots under a deadline and a minimum rate, and a slot whose reader has
// stalled is taken away for a waiting request (readUnauthenticated).
func (c *Consumer) authenticate(w http.ResponseWriter, r *http.Request) ([]byte, string, int) {
	if c.cfg.BearerToken != "" {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok &&
			subtle.ConstantTimeCompare([]byte(tok), []byte(c.cfg.BearerToken)) == 1 {
			return c.readBody(w, r, nil)
		}
	}
	if len(c.cfg.HMACSecret) == 0 {
		if c.cfg.BearerToken == "" && c.cfg.InsecureNoAuth {
			return c.readBody(w, r, nil)
		}
		return nil, "", http.StatusUnauthorized
	}
	if len(r.Header.Values(wire.HeaderSignature)) > 1 || len(r.Header.Values(wire.HeaderSignatureV1)) > 1 {
		c.stats.refusedUnread.Add(1)
		return nil, "", http.StatusUnauthorized // ambiguous: which one was signed?
	}
	sig := r.Header.Get(wire.HeaderSignature)
	if v := r.Header.Get(wire.HeaderSignatureV1); v != "" {
		sig = v // upgrade window: the v1 form beside the body-only one (wire.HeaderSignatureV1)
	}
	ts, mac, v1 := wire.ParseSignature(sig)
	if !v1 {
		if c.cfg.AcceptBodyOnlySignature && strings.HasPrefix(sig, "sha256=") {
			return c.readUnauthenticated(w, r, sig)
		}
		c.stats.refusedUnread.Add(1)
		return nil, "", http.StatusUnauthorized
	}
	now := c.cfg.Now().Unix()
	window := int64(c.cfg.SignatureWindow / time.Second)
	if ts < now-window || ts > now+window {
		c.stats.stale.Add(1)
		return nil, "stale_signature", http.StatusUnauthorized
	}
	var key [32]byte
	copy(key[:], mac)
	if c.replay.has(key, now) {
		c.stats.replayed.Add(1)
		return nil, "replayed_signature", http.StatusUnauthorized
	}
	claimed := r.Header.Get(wire.HeaderEnvelopeSHA256)
	if !hmac.Equal(mac, wire.RequestMACDigest(c.cfg.HMACSecret, ts, r.Header, claimed)) {
		c.stats.refusedUnread.Add(1)
		return nil, "", http.StatusUnauthorized
	}
	// Remembered from now until it would be stale anyway: a second use within the window is a
	// replay, even while this request's body is still arriving.
	if !c.replay.add(key, ts+window, now) {
		c.stats.replayed.Add(1)
		return nil, "replayed_signature", http.StatusUnauthorized
	}
	body, refusal, status := c.readBody(w, r, nil)
	if status != 0 {
		return nil, refusal, status
	}
	// The MAC covered the claimed digest; the body must be what it claims (else it was changed
	// on the way: the signature does not cover it).
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != claimed {
		return nil, "body_digest", http.StatusUnauthorized
	}
	return body, "", 0
}

// readUnauthenticated reads the body of a request whose sender is known only once the body is
// (the body-only signature), in a slot of c.slots, then checks the signature.
func (c *Consumer) readUnauthenticated(w http.ResponseWriter, r *http.Request, sig string) ([]byte, string, int) {
	s := &slot{rc: http.NewResponseController(w)}
	c.stats.waiting.Add(1)
	ok := c.slots.acquire(r.Context(), s)
	c.stats.waiting.Add(-1)
	if !ok {
		return nil, "slot_wait", http.StatusRequestTimeout
	}
	n := c.stats.reading.Add(1)
	for p := c.stats.peak.Load(); n > p && !c.stats.peak.CompareAndSwap(p, n); p = c.stats.peak.Load() {
	}
	body, refusal, status := c.readBody(w, r, s)
	c.stats.bytes.Add(s.read.Load())
	c.stats.reading.Add(-1)
	c.slots.release(s)
	if s.evicted.Load() {
		c.stats.evicted.Add(1)
	}
	if status != 0 {
		return nil, refusal, status
	}
	if !validBodySignature(c.cfg.HMACSecret, body, sig) {
		return nil, "", http.StatusUnauthorized
	}
	return body, "", 0
}

// readBody reads the body, capped by MaxBodyBytes. With a slot (an unauthenticated read) the
// connection's read deadline is start + UnauthenticatedReadGrace + bytes so far /
// MinUnauthenticatedBodyRate: a sender slower than the rate is cut, and a slot whose reader
// receives nothing for UnauthenticatedStall may be cut at once for a waiting request.
func (c *Consumer) readBody(w http.ResponseWriter, r *http.Request, s *slot) ([]byte, string, int) {
	// One buffer of the declared length (checked against MaxBodyBytes before any read), not
	// io.ReadAll's doubling with its garbage copies.
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, c.cfg.MaxBodyBytes)
	if s != nil {
		start := time.Now()
		grace, rate := c.cfg.UnauthenticatedReadGrace, c.cfg.MinUnauthenticatedBodyRate
		_ = s.rc.SetReadDeadline(start.Add(grace)) // ErrNotSupported off a real server: no deadline
		src = &rateReader{r: src, s: s, deadline: func(n int64) time.Time {
			return start.Add(grace + time.Duration(float64(n)/float64(rate)*float64(time.Second)))
		}}
		defer func() { _ = s.rc.SetReadDeadline(time.Time{}) }()
	}
	_, err := buf.ReadFrom(src)
	body := buf.Bytes()
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return nil, "body_too_large", http.StatusRequestEntityTooLarge
		case s != nil && (s.evicted.Load() || errors.Is(err, os.ErrDeadlineExceeded)):
			return nil, "slow_body", http.StatusRequestTimeout
		}
		return nil, "bad_request", http.StatusBadRequest
	}
	return body, "", 0
}

// rateReader moves the connection's read deadline forward as bytes arrive and records progress.
type rateReader struct {
	r        io.Reader
	s        *slot
	n        int64
	deadline func(n int64) time.Time
}

func (rr *rateReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if n > 0 {
		rr.n += int64(n)
		rr.s.read.Store(rr.n)
		rr.s.last.Store(time.Now().UnixNano())
		if !rr.s.evicted.Load() {
			_ = rr.s.rc.SetReadDeadline(rr.deadline(rr.n))
		}
	}
	return n, err
}

// slot is one unauthenticated read in progress.
type slot struct {
	rc      *http.ResponseController
	last    atomic.Int64 // unix nanoseconds of the last progress (or of the grant)
	read    atomic.Int64
	evicted atomic.Bool
}

// slotPool hands out MaxUnauthenticatedReads slots. A request that finds them all taken waits
// (holding its connection, not a buffer); a released slot goes to the request that started
// waiting last (a fresh request is served before the ones a flood queued earlier), and while it
// waits, a holder that has received nothing for `stall` loses its slot: its read deadline is set
// to now. A wait ends after maxSlotWait (the dispatcher's default request timeout: past it the
// sender has given up).
type slotPool struct {
	mu      sync.Mutex
	free    int
	held    map[*slot]struct{}
	waiters []chan struct{}
	stall   time.Duration
}

const maxSlotWait = 10 * time.Second

func newSlotPool(n int, stall time.Duration) *slotPool {
	return &slotPool{free: n, held: map[*slot]struct{}{}, stall: stall}
}

func (p *slotPool) acquire(ctx context.Context, s *slot) bool {
	p.mu.Lock()
	if p.free > 0 {
		p.free--
		p.grantLocked(s)
		p.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	p.waiters = append(p.waiters, ch)
	p.mu.Unlock()
	tick := time.NewTicker(max(p.stall/4, time.Millisecond))
	defer tick.Stop()
	giveUp := time.NewTimer(maxSlotWait)
	defer giveUp.Stop()
	p.evictStalled()
	for {
		select {
		case <-ch:
			p.mu.Lock()
			p.grantLocked(s)
			p.mu.Unlock()
			return true
		case <-tick.C:
			p.evictStalled()
			continue
		case <-ctx.Done():
		case <-giveUp.C:
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		for i, w := range p.waiters {
			if w == ch {
				p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
				return false
			}
		}
		// Handed a slot at the same moment: pass it on.
		p.releaseLocked()
		return false
	}
}

func (p *slotPool) grantLocked(s *slot) {
	s.last.Store(time.Now().UnixNano())
	p.held[s] = struct{}{}
}

func (p *slotPool) release(s *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, s)
	p.releaseLocked()
}

func (p *slotPool) releaseLocked() {
	if n := len(p.waiters); n > 0 {
		ch := p.waiters[n-1]
		p.waiters = p.waiters[:n-1]
		close(ch)
		return
	}
	p.free++
}

// evictStalled cuts the holder that has waited longest for its next bytes, if that is at least
// p.stall; at most one per call, so each waiting request frees at most one slot per tick.
func (p *slotPool) evictStalled() {
	cutoff := time.Now().Add(-p.stall).UnixNano()
	p.mu.Lock()
	var victim *slot
	for s := range p.held {
		if l := s.last.Load(); !s.evicted.Load() && l <= cutoff && (victim == nil || l < victim.last.Load()) {
			victim = s
		}
	}
	if victim != nil {
		victim.evicted.Store(true)
	}
	p.mu.Unlock()
	if victim != nil {
		_ = victim.rc.SetReadDeadline(time.Now())
	}
}

// Sign returns the body-only wire.HeaderSignature value for body under secret (accepted only
// with Config.AcceptBodyOnlySignature).
//
// Deprecated: the same as wire.Sign; sign requests with wire.SignRequest.
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
	reading, waiting, peak, bytes, stale, replayed, refusedUnread, evicted atomic.Int64
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
	// RefusedUnread: requests refused from their headers alone (missing, malformed or wrong
	// signature) without reading a body byte.
	RefusedUnread int64
	// EvictedReads: unauthenticated reads cut because they stalled while another request waited.
	EvictedReads int64
}

// HTTPStats returns the handler's counters.
func (c *Consumer) HTTPStats() HTTPStats {
	return HTTPStats{
		UnauthenticatedReading: c.stats.reading.Load(), UnauthenticatedWaiting: c.stats.waiting.Load(),
		PeakUnauthenticatedReading: c.stats.peak.Load(), UnauthenticatedBytes: c.stats.bytes.Load(),
		StaleSignatures: c.stats.stale.Load(), ReplayedSignatures: c.stats.replayed.Load(),
		RefusedUnread: c.stats.refusedUnread.Load(), EvictedReads: c.stats.evicted.Load(),
	}
}

// deliveryFromHeaders reads the delivery headers by the grammar of docs/transport-http.md
// ("Header grammar"): each at most once; Destination, Consumer, Event-Id and
// Event-Envelope-Sha256 required and non-empty; an empty optional header is the same as an
// absent one (both sign as an empty line); numbers are 1*DIGIT (no sign, no spaces).
func deliveryFromHeaders(h http.Header) (wire.Delivery, bool) {
	for _, name := range wire.SignedHeaders {
		if len(h.Values(name)) > 1 {
			return wire.Delivery{}, false
		}
	}
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
	var ok bool
	if v := h.Get(wire.HeaderAttemptNumber); v != "" {
		if d.AttemptNumber, ok = decimal(v); !ok {
			return d, false
		}
	}
	if v := h.Get(wire.HeaderReceiptSchema); v != "" {
		if d.ExpectedReceiptSchemaVersion, ok = decimal(v); !ok {
			return d, false
		}
	}
	if v := h.Get(wire.HeaderProjection); v != "" {
		i := strings.LastIndexByte(v, '@')
		if i <= 0 {
			return d, false
		}
		d.RequiredProjectionName = v[:i]
		if d.RequiredProjectionVersion, ok = decimal(v[i+1:]); !ok {
			return d, false
		}
	}
	return d, true
}

// decimal parses 1*DIGIT (at most 9 digits: no sign, no spaces, no overflow).
func decimal(v string) (int, bool) {
	if v == "" || len(v) > 9 {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// writeSuccess answers 200 wire.HTTPSuccessBody: the ack and the receipt are canonical JSON
// (built once by the kit, or read back from the inbox and parsed), so they are written as they
// are - the same bytes writeJSON would produce, without re-encoding them.
func writeSuccess(w http.ResponseWriter, ack, rcpt json.RawMessage) {
	buf := make([]byte, 0, len(ack)+len(rcpt)+24)
	buf = append(append(append(buf, `{"ack":`...), ack...), `,"receipt":`...)
	buf = append(append(buf, rcpt...), "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf)
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
