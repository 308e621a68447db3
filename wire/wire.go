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
	// HeaderSignature is "sha256=" + lower-case hex HMAC-SHA256(secret, request body).
	HeaderSignature = "Pgoutbox-Signature"
)

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
}

// Sign returns the HeaderSignature value for body under secret: "sha256=" followed by the
// lower-case hex HMAC-SHA256.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
