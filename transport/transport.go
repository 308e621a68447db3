// Package transport is the dispatcher's Transport port (SPEC R-DP-2) and its adapters:
// in-process (a registry of wire.Consumer values, for embedding and development), HTTP
// (docs/transport-http.md) and NATS JetStream (D-7). A transport moves the canonical envelope
// bytes to the destination and returns the consumer's answer as a wire.Result; it never decides
// whether an answer is acceptable to the kernel (ack_delivery does that).
package transport

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/wire"
)

// Transport delivers one claimed delivery. An error return means the transport failed before a
// consumer answer was obtained; the dispatcher records it as retryable (transport_error, or
// consumer_timeout when the error is a timeout).
type Transport interface {
	Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error)
	Close() error
}

// Codes is the closed list of normalized error codes (SPEC R-AK-7) with their class, as the
// database has them: the rows of outbox.error_codes, read with LoadCodes at the dispatcher's
// preflight (issue 34: no copy of the table in Go). Immutable after construction.
type Codes struct {
	retryable map[string]bool // code -> retryable
}

// NewCodes returns the code list of rows (pgcall.ErrorCodeCatalog).
func NewCodes(rows []pgcall.ErrorCode) *Codes {
	c := &Codes{retryable: make(map[string]bool, len(rows))}
	for _, r := range rows {
		c.retryable[r.Code] = r.Retryable
	}
	return c
}

// LoadCodes reads the normalized error codes from the database (outbox.error_code_catalog).
func LoadCodes(ctx context.Context, db pgcall.DBTX) (*Codes, error) {
	rows, err := pgcall.ErrorCodeCatalog(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("error codes: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("error codes: outbox.error_codes is empty")
	}
	return NewCodes(rows), nil
}

// Retryable reports whether code is a known retryable code (false on a nil Codes).
func (c *Codes) Retryable(code string) bool {
	if c == nil {
		return false
	}
	r, ok := c.retryable[code]
	return ok && r
}

// NonRetryable reports whether code is a known non-retryable code (false on a nil Codes).
func (c *Codes) NonRetryable(code string) bool {
	if c == nil {
		return false
	}
	r, ok := c.retryable[code]
	return ok && !r
}

// Codes used by the dispatcher and the transports themselves.
const (
	CodeConsumerUnavailable = "consumer_unavailable"
	CodeConsumerTimeout     = "consumer_timeout"
	CodeTransportError      = "transport_error"
	CodeInvalidAck          = "invalid_ack"
	CodeDigestConflict      = "digest_conflict"
	CodeEnvelopeInvalid     = "envelope_invalid"
	CodeUnsupportedSchema   = "unsupported_schema"
)

var refRE = regexp.MustCompile(`^[A-Za-z0-9._:/@=+-]{1,128}$`)

// SanitizeRef returns ref when it is a short token of safe characters (an error reference,
// never payload content), and "" otherwise.
func SanitizeRef(ref string) string {
	if refRE.MatchString(ref) {
		return ref
	}
	return ""
}

// Normalize maps a consumer's answer onto the closed list c: a Retryable answer with a code
// outside the retryable codes, or a NonRetryable answer with a code outside the non-retryable
// codes, becomes Retryable consumer_unavailable (an inconsistent or unknown answer is never
// quarantined); an unknown status likewise. Refs are sanitized. Acknowledged answers pass
// unchanged.
func (c *Codes) Normalize(r wire.Result) wire.Result {
	r.Ref = SanitizeRef(r.Ref)
	switch r.Status {
	case wire.Acknowledged:
		return r
	case wire.Retryable:
		if !c.Retryable(r.Code) {
			return wire.Result{Status: wire.Retryable, Code: CodeConsumerUnavailable, Ref: r.Ref}
		}
	case wire.NonRetryable:
		if !c.NonRetryable(r.Code) {
			return wire.Result{Status: wire.Retryable, Code: CodeConsumerUnavailable, Ref: r.Ref}
		}
	default:
		return wire.Result{Status: wire.Retryable, Code: CodeConsumerUnavailable, Ref: r.Ref}
	}
	r.Ack, r.Receipt = nil, nil
	return r
}

// InProcess delivers to wire.Consumer values registered per destination (the consumer kit's
// in-process adapter). It is a development and embedding transport: config refuses it in
// production mode (R-DP-6).
type InProcess struct {
	consumers map[string]wire.Consumer
}

// NewInProcess returns an in-process transport over consumers (destination → consumer).
func NewInProcess(consumers map[string]wire.Consumer) *InProcess {
	m := make(map[string]wire.Consumer, len(consumers))
	for k, v := range consumers {
		m[k] = v
	}
	return &InProcess{consumers: m}
}

// ErrNoConsumer is returned for a destination without a registered in-process consumer.
var ErrNoConsumer = errors.New("no in-process consumer registered")

// Deliver calls the destination's consumer directly.
func (p *InProcess) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	c, ok := p.consumers[d.Destination]
	if !ok {
		return wire.Result{}, fmt.Errorf("%w for destination %s", ErrNoConsumer, d.Destination)
	}
	return c.Deliver(ctx, d)
}

// Has reports whether a consumer is registered for destination.
func (p *InProcess) Has(destination string) bool { _, ok := p.consumers[destination]; return ok }

// Close does nothing.
func (p *InProcess) Close() error { return nil }

// Func adapts a function to Transport (tests, decorators).
type Func func(ctx context.Context, d wire.Delivery) (wire.Result, error)

// Deliver calls f.
func (f Func) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) { return f(ctx, d) }

// Close does nothing.
func (f Func) Close() error { return nil }
