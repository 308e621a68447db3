package consumer

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/oceanway/pgoutbox/wire"
)

// ServeHTTP speaks the HTTP wire contract (docs/transport-http.md): POST, body = the canonical
// envelope bytes, delivery fields in the wire.Header* headers, authenticated by
// wire.HeaderSignature ("sha256=" + hex HMAC-SHA256(secret, body)) or "Authorization: Bearer".
// Answers: 200 wire.HTTPSuccessBody{ack, receipt}; 422 (409 for receipt_conflict)
// wire.HTTPErrorBody for non-retryable codes; 503 (429 for capacity_protection) for retryable
// ones; 401 when authentication fails (nothing is applied); 400 for a malformed request.
func (c *Consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, wire.HTTPErrorBody{Code: "method_not_allowed"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, wire.HTTPErrorBody{Code: "body_too_large"})
			return
		}
		writeJSON(w, http.StatusBadRequest, wire.HTTPErrorBody{Code: "bad_request"})
		return
	}
	if !c.authenticated(r, body) {
		c.log.Warn("http delivery refused: authentication failed", "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, wire.HTTPErrorBody{Code: "unauthorized"})
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

// authenticated: a request must pass one configured method. With none configured, only
// InsecureNoAuth lets it through (fail closed).
func (c *Consumer) authenticated(r *http.Request, body []byte) bool {
	if len(c.cfg.HMACSecret) > 0 {
		if sig := r.Header.Get(wire.HeaderSignature); sig != "" && validSignature(c.cfg.HMACSecret, body, sig) {
			return true
		}
	}
	if c.cfg.BearerToken != "" {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok &&
			subtle.ConstantTimeCompare([]byte(tok), []byte(c.cfg.BearerToken)) == 1 {
			return true
		}
	}
	return len(c.cfg.HMACSecret) == 0 && c.cfg.BearerToken == "" && c.cfg.InsecureNoAuth
}

// Sign returns the wire.HeaderSignature value for body under secret.
func Sign(secret, body []byte) string { return wire.Sign(secret, body) }

func validSignature(secret, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
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
