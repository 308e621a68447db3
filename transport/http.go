package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/wire"
)

// HTTPOptions configure one HTTP destination (docs/transport-http.md).
type HTTPOptions struct {
	URL              string
	Timeout          time.Duration
	Auth             string // config.AuthNone | AuthHMAC | AuthBearer
	Secret           config.Secret
	MaxResponseBytes int
	// Signature: config.SignatureV1 (default), SignatureBoth or SignatureBodySHA256 (auth hmac).
	Signature string
	// MaxInFlight is how many requests the dispatcher may have in flight to this destination at
	// once (its concurrency): the keep-alive pool keeps that many idle connections, so a
	// connection is reused rather than re-dialled between deliveries (0: 256).
	MaxInFlight int
	// Client overrides the HTTP client (tests); redirects are never followed either way.
	Client *http.Client
	// Now is the signature clock (default time.Now; tests).
	Now func() time.Time
}

// HTTP posts the canonical envelope to a consumer URL and maps the answer (docs/transport-http.md).
type HTTP struct {
	opts   HTTPOptions
	client *http.Client
	// codes: the normalized error codes the dispatcher loaded at preflight (SetCodes).
	codes atomic.Pointer[Codes]
}

// SetCodes sets the error codes error answers are classified with (CodesUser).
func (h *HTTP) SetCodes(c *Codes) { h.codes.Store(c) }

// NewHTTP returns an HTTP transport.
func NewHTTP(opts HTTPOptions) (*HTTP, error) {
	if opts.URL == "" {
		return nil, errors.New("http transport: URL required")
	}
	if (opts.Auth == config.AuthHMAC || opts.Auth == config.AuthBearer) && opts.Secret.Empty() {
		return nil, fmt.Errorf("http transport: auth %s needs a secret", opts.Auth)
	}
	switch opts.Signature {
	case "":
		opts.Signature = config.SignatureV1
	case config.SignatureV1, config.SignatureBoth, config.SignatureBodySHA256:
	default:
		return nil, fmt.Errorf("http transport: unknown signature form %q", opts.Signature)
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 1 << 20
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	c := opts.Client
	if c == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		idle := opts.MaxInFlight
		if idle <= 0 {
			idle = 256
		}
		// One destination is one host: every connection the deliveries in flight use may stay
		// idle for the next delivery (the default 2 per host, or the default 100 in all, would
		// close and re-dial connections under load). An answer that fits max_response_bytes is
		// read to its end (below), so its connection goes back to the pool.
		tr.MaxIdleConnsPerHost = idle
		tr.MaxIdleConns = idle
		if opts.MaxInFlight > 0 {
			// No more connections than requests in flight: without the bound a burst dials a
			// few extra connections that race for the same requests and are then closed.
			tr.MaxConnsPerHost = opts.MaxInFlight
		}
		c = &http.Client{Transport: tr}
	}
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &HTTP{opts: opts, client: &cc}, nil
}

// Deliver POSTs d.Envelope (the canonical bytes) with the wire headers and maps the response.
func (h *HTTP) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.opts.URL, bytes.NewReader(d.Envelope))
	if err != nil {
		return wire.Result{}, fmt.Errorf("http transport: build request: %w", err)
	}
	hd := req.Header
	wire.SetHeaders(hd, d)
	hd.Set("Accept", "application/json")
	switch h.opts.Auth {
	case config.AuthHMAC:
		// v1: timestamp + every delivery header + body digest (docs/transport-http.md, R-SEC-5).
		// During an upgrade window the obsolete body-only form goes in Pgoutbox-Signature
		// (what a consumer built on it reads) and v1 beside it in Pgoutbox-Signature-V1.
		switch h.opts.Signature {
		case config.SignatureBoth:
			v1 := wire.SignRequest(h.opts.Secret.Bytes(), h.now().Unix(), hd, d.Envelope)
			hd.Set(wire.HeaderSignature, wire.Sign(h.opts.Secret.Bytes(), d.Envelope))
			hd.Set(wire.HeaderSignatureV1, v1)
		case config.SignatureBodySHA256:
			hd.Set(wire.HeaderSignature, wire.Sign(h.opts.Secret.Bytes(), d.Envelope))
		default:
			hd.Set(wire.HeaderSignature, wire.SignRequest(h.opts.Secret.Bytes(), h.now().Unix(), hd, d.Envelope))
		}
	case config.AuthBearer:
		hd.Set("Authorization", "Bearer "+string(h.opts.Secret.Bytes()))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		// *url.Error keeps Timeout(); the dispatcher classifies consumer_timeout vs transport_error.
		return wire.Result{}, fmt.Errorf("http transport: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.opts.MaxResponseBytes)+1))
	if err != nil {
		return wire.Result{}, fmt.Errorf("http transport: read response: %w", err)
	}
	if len(body) > h.opts.MaxResponseBytes {
		return wire.Result{Status: wire.Retryable, Code: CodeInvalidAck, Ref: "http:response_too_large"}, nil
	}
	return MapHTTPResponse(resp.StatusCode, body, h.codes.Load()), nil
}

// MapHTTPResponse is the response mapping of docs/transport-http.md:
//   - 200 with a JSON object holding exactly "ack" and "receipt", both JSON objects → Acknowledged;
//   - any other 2xx, or a 200 whose body is not that → Retryable invalid_ack;
//   - 409/422 with {"code": <non-retryable code>} → NonRetryable code;
//   - 429/503 with {"code": <retryable code>} → Retryable code;
//   - anything else (other statuses, missing/unknown codes, a code of the wrong class for the
//     status) → Retryable consumer_unavailable.
//
// The codes and their classes are codes, the rows of outbox.error_codes the dispatcher loaded at
// preflight. With none (nil: a transport used without a dispatcher) the class comes from the
// status alone; the dispatcher always hands its codes over and checks every answer again
// (Codes.Normalize).
func MapHTTPResponse(status int, body []byte, codes *Codes) wire.Result {
	switch {
	case status == http.StatusOK:
		ack, receipt, ok := parseSuccess(body)
		if !ok {
			return wire.Result{Status: wire.Retryable, Code: CodeInvalidAck, Ref: "http:malformed_success"}
		}
		return wire.Result{Status: wire.Acknowledged, Ack: ack, Receipt: receipt}
	case status >= 200 && status < 300:
		return wire.Result{Status: wire.Retryable, Code: CodeInvalidAck, Ref: "http:status_" + strconv.Itoa(status)}
	case status == http.StatusConflict || status == http.StatusUnprocessableEntity:
		if e, ok := parseError(body); ok && (codes == nil || codes.NonRetryable(e.Code)) {
			return wire.Result{Status: wire.NonRetryable, Code: e.Code, Ref: SanitizeRef(e.Ref)}
		}
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		if e, ok := parseError(body); ok && (codes == nil || codes.Retryable(e.Code)) {
			return wire.Result{Status: wire.Retryable, Code: e.Code, Ref: SanitizeRef(e.Ref)}
		}
	}
	return wire.Result{Status: wire.Retryable, Code: CodeConsumerUnavailable, Ref: "http:status_" + strconv.Itoa(status)}
}

func parseSuccess(body []byte) (ack, receipt json.RawMessage, ok bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || len(m) != 2 {
		return nil, nil, false
	}
	ack, receipt = m["ack"], m["receipt"]
	if !isObject(ack) || !isObject(receipt) {
		return nil, nil, false
	}
	return ack, receipt, true
}

func parseError(body []byte) (wire.HTTPErrorBody, bool) {
	var e wire.HTTPErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		return e, false
	}
	return e, e.Code != ""
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil
}

func (h *HTTP) now() time.Time {
	if h.opts.Now != nil {
		return h.opts.Now()
	}
	return time.Now()
}

// Close releases idle connections.
func (h *HTTP) Close() error {
	h.client.CloseIdleConnections()
	return nil
}
