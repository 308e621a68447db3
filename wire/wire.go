// Package wire is the contract between a dispatcher and a consumer, independent of transport:
// what a delivery carries, what a consumer answers, and the HTTP header names of the HTTP
// transport (docs/transport-http.md). Both the dispatcher's transports and the consumer kit
// use it, so the two sides cannot drift.
package wire

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Tenant is the tenant block of an EventEnvelope@1 (SPEC D-3); projectId is optional.
type Tenant struct {
	TenantKind  string `json:"tenantKind"`
	TenantID    string `json:"tenantId"`
	WorkspaceID string `json:"workspaceId"`
	ProjectID   string `json:"projectId,omitempty"`
}

// Delivery is one claimed delivery as a consumer sees it.
type Delivery struct {
	Destination                  string `json:"destination"`
	ConsumerName                 string `json:"consumerName"`
	EventID                      string `json:"eventId"`
	AttemptID                    string `json:"attemptId"`
	AttemptNumber                int    `json:"attemptNumber"`
	ExpectedReceiptType          string `json:"expectedReceiptType"`
	ExpectedReceiptSchemaVersion int    `json:"expectedReceiptSchemaVersion"`
	// Projection target frozen on the delivery; empty/0 for non-projection destinations.
	RequiredProjectionName    string `json:"requiredProjectionName,omitempty"`
	RequiredProjectionVersion int    `json:"requiredProjectionVersion,omitempty"`
	// Envelope is the canonical (RFC 8785) EventEnvelope@1 bytes; EnvelopeSHA256 its digest.
	Envelope                       json.RawMessage `json:"-"`
	EnvelopeDigestAlgorithmVersion string          `json:"eventEnvelopeDigestAlgorithmVersion"`
	EnvelopeSHA256                 string          `json:"eventEnvelopeSha256"`
	// TraceParent and TraceState are the W3C trace context stored beside the event at append
	// (R-DP-7), "" when none; sent as HeaderTraceParent/HeaderTraceState, never in the body.
	TraceParent string `json:"-"`
	TraceState  string `json:"-"`
}

// Status is a consumer's answer class.
type Status int

const (
	// Acknowledged: the consumer applied (or had already applied) the event; Ack and Receipt set.
	Acknowledged Status = iota + 1
	// Retryable: a transient condition (Code is a retryable normalized code).
	Retryable
	// NonRetryable: the event can never be applied by this consumer (Code non-retryable).
	NonRetryable
)

func (s Status) String() string {
	switch s {
	case Acknowledged:
		return "acknowledged"
	case Retryable:
		return "retryable"
	case NonRetryable:
		return "non_retryable"
	}
	return "unknown"
}

// Result is what a consumer answers for one delivery.
type Result struct {
	Status Status
	// Code is a normalized error code (SPEC R-AK-7) when Status is not Acknowledged.
	Code string
	// Ref is a sanitized error reference (no payload content), optional.
	Ref string
	// Ack is the ActiveConsumerAck@1 document, Receipt the receipt document it refers to.
	Ack     json.RawMessage
	Receipt json.RawMessage
}

// Consumer is implemented by the consumer kit (in-process adapter) and by every transport's
// client side. An error return means the transport failed (retryable transport_error).
type Consumer interface {
	Deliver(ctx context.Context, d Delivery) (Result, error)
}

// HTTP transport header names (docs/transport-http.md).
const (
	HeaderDestination    = "Pgoutbox-Destination"
	HeaderConsumer       = "Pgoutbox-Consumer"
	HeaderEventID        = "Pgoutbox-Event-Id"
	HeaderAttemptID      = "Pgoutbox-Attempt-Id"
	HeaderAttemptNumber  = "Pgoutbox-Attempt-Number"
	HeaderEnvelopeSHA256 = "Pgoutbox-Event-Envelope-Sha256"
	HeaderReceiptType    = "Pgoutbox-Expected-Receipt-Type"
	HeaderReceiptSchema  = "Pgoutbox-Expected-Receipt-Schema-Version"
	HeaderProjection     = "Pgoutbox-Required-Projection" // "name@version", absent when none
	// HeaderSignature is "t=<unix seconds>,v1=<lower-case hex HMAC-SHA256(secret, SigningString)>"
	// (SignRequest). The body-only form "sha256=<hex HMAC-SHA256(secret, body)>" (Sign) is
	// obsolete: it can be replayed at any time; a consumer accepts it only when configured to.
	HeaderSignature = "Pgoutbox-Signature"
	// HeaderSignatureV1 carries the v1 signature while a destination's signature setting is
	// "both" (an upgrade window): HeaderSignature then holds the obsolete body-only form for
	// consumers not yet upgraded, and this header the v1 form. A consumer that knows v1 checks
	// this header when present (docs/transport-http.md, "Upgrading the signature").
	HeaderSignatureV1 = "Pgoutbox-Signature-V1"
	// HeaderTraceParent and HeaderTraceState are the W3C Trace Context of the request that
	// appended the event (SPEC R-DP-7), sent only when the event has one. They are hints for
	// tracing, not delivery facts: the signature does not cover them (package tracing).
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// SignatureVersion tags the signing string of the current HMAC scheme.
const SignatureVersion = "pgoutbox-hmac-v1"

// SignedHeaders are the delivery headers the v1 signature covers, in signing-string order
// (a header that is absent contributes an empty line).
var SignedHeaders = []string{HeaderDestination, HeaderConsumer, HeaderEventID, HeaderAttemptID,
	HeaderAttemptNumber, HeaderEnvelopeSHA256, HeaderReceiptType, HeaderReceiptSchema, HeaderProjection}

// SigningString is what the v1 HMAC covers (docs/transport-http.md, "Signature"): the lines
//
//	pgoutbox-hmac-v1
//	<timestamp: unix seconds, decimal>
//	<each of SignedHeaders' values, in order; "" when absent>
//	<lower-case hex SHA-256 of the body>
//
// joined by "\n" (no trailing newline). It binds the body to its destination, event, attempt and
// time, so a captured request cannot be replayed to another destination, as another attempt or
// outside the consumer's window.
func SigningString(timestamp int64, h http.Header, body []byte) []byte {
	sum := sha256.Sum256(body)
	return SigningStringDigest(timestamp, h, hex.EncodeToString(sum[:]))
}

// SigningStringDigest is SigningString with the body given by its lower-case hex SHA-256. The
// dispatcher's body is the canonical envelope whose digest is HeaderEnvelopeSHA256, so a
// receiver can check the MAC against that header value before it reads the body, then check
// that the body hashes to it.
func SigningStringDigest(timestamp int64, h http.Header, bodySHA256Hex string) []byte {
	b := make([]byte, 0, 512)
	b = append(b, SignatureVersion...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, timestamp, 10)
	for _, name := range SignedHeaders {
		b = append(b, '\n')
		b = append(b, h.Get(name)...)
	}
	b = append(b, '\n')
	return append(b, bodySHA256Hex...)
}

// RequestMAC is the v1 MAC: HMAC-SHA256(secret, SigningString(timestamp, h, body)).
func RequestMAC(secret []byte, timestamp int64, h http.Header, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(SigningString(timestamp, h, body))
	return m.Sum(nil)
}

// RequestMACDigest is RequestMAC for a body known by its lower-case hex SHA-256.
func RequestMACDigest(secret []byte, timestamp int64, h http.Header, bodySHA256Hex string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(SigningStringDigest(timestamp, h, bodySHA256Hex))
	return m.Sum(nil)
}

// BodyMAC is the obsolete body-only MAC: HMAC-SHA256(secret, body).
func BodyMAC(secret, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return m.Sum(nil)
}

// SignRequest returns the HeaderSignature value of the v1 scheme for a request whose delivery
// headers are already set in h: "t=<timestamp>,v1=<hex HMAC-SHA256(secret, SigningString)>".
func SignRequest(secret []byte, timestamp int64, h http.Header, body []byte) string {
	return "t=" + strconv.FormatInt(timestamp, 10) + ",v1=" + hex.EncodeToString(RequestMAC(secret, timestamp, h, body))
}

// ParseSignature splits a v1 HeaderSignature value into its timestamp and MAC. ok is false for
// anything else (including the obsolete "sha256=" form).
func ParseSignature(v string) (timestamp int64, mac []byte, ok bool) {
	ts, rest, found := strings.Cut(v, ",")
	if !found {
		return 0, nil, false
	}
	tsv, ok1 := strings.CutPrefix(ts, "t=")
	hexMAC, ok2 := strings.CutPrefix(rest, "v1=")
	if !ok1 || !ok2 || len(hexMAC) != 64 || tsv == "" || len(tsv) > 12 {
		return 0, nil, false
	}
	for _, c := range tsv {
		if c < '0' || c > '9' {
			return 0, nil, false
		}
	}
	t, err := strconv.ParseInt(tsv, 10, 64)
	if err != nil {
		return 0, nil, false
	}
	mac, err = hex.DecodeString(hexMAC)
	if err != nil || strings.ToLower(hexMAC) != hexMAC {
		return 0, nil, false
	}
	return t, mac, true
}

// HTTPSuccessBody is the only success answer of the HTTP transport: status 200 with this body.
type HTTPSuccessBody struct {
	Ack     json.RawMessage `json:"ack"`
	Receipt json.RawMessage `json:"receipt"`
}

// HTTPErrorBody is the body of a 409/422 (non-retryable) or 429/503 (retryable) answer.
type HTTPErrorBody struct {
	Code string `json:"code"`
	Ref  string `json:"ref,omitempty"`
}

// SetHeaders sets the delivery headers of the HTTP transport on h (docs/transport-http.md);
// the signature is set separately (Sign) because it depends on the consumer's secret.
func SetHeaders(h http.Header, d Delivery) {
	h.Set("Content-Type", "application/json")
	h.Set(HeaderDestination, d.Destination)
	h.Set(HeaderConsumer, d.ConsumerName)
	h.Set(HeaderEventID, d.EventID)
	h.Set(HeaderAttemptID, d.AttemptID)
	h.Set(HeaderAttemptNumber, strconv.Itoa(d.AttemptNumber))
	h.Set(HeaderEnvelopeSHA256, d.EnvelopeSHA256)
	h.Set(HeaderReceiptType, d.ExpectedReceiptType)
	h.Set(HeaderReceiptSchema, strconv.Itoa(d.ExpectedReceiptSchemaVersion))
	if d.RequiredProjectionName != "" {
		h.Set(HeaderProjection, d.RequiredProjectionName+"@"+strconv.Itoa(d.RequiredProjectionVersion))
	}
	if d.TraceParent != "" { // R-DP-7: without a trace context the headers are what they were
		h.Set(HeaderTraceParent, d.TraceParent)
		if d.TraceState != "" {
			h.Set(HeaderTraceState, d.TraceState)
		}
	}
}

// Sign returns the legacy body-only HeaderSignature value for body under secret: "sha256="
// followed by the lower-case hex HMAC-SHA256 of the body. It covers neither time, destination
// nor attempt (a captured request can be replayed): the dispatcher sends it only to a
// destination configured with signature = "both" or "body-sha256" (an upgrade window), and the
// consumer kit accepts it only with Config.AcceptBodyOnlySignature. New code signs with
// SignRequest.
func Sign(secret, body []byte) string {
	return "sha256=" + hex.EncodeToString(BodyMAC(secret, body))
}

// VerifyRequest reports whether h carries a valid v1 signature of body under secret and
// returns its timestamp. It checks the MAC only: freshness and replay are the receiver's window
// (the consumer kit's Config.SignatureWindow).
func VerifyRequest(secret []byte, h http.Header, body []byte) (int64, bool) {
	ts, mac, ok := ParseSignature(h.Get(HeaderSignature))
	if !ok {
		return 0, false
	}
	return ts, hmac.Equal(mac, RequestMAC(secret, ts, h, body))
}
