// Package consumer is the consumer kit of SPEC §6 (R-CO-1..5): it wraps a user function
//
//	apply(ctx, tx, event) (receiptFields, error)
//
// so that the revision check, the user's domain mutation and the content-addressed receipt
// commit in ONE PostgreSQL transaction, and answers every delivery with an ActiveConsumerAck@1
// (acknowledged), a retryable code or a non-retryable code. A Consumer serves both the
// dispatcher's in-process registry transport (it implements wire.Consumer) and the HTTP
// transport (it implements http.Handler, docs/transport-http.md).
//
// Handling one delivery:
//  1. outside any transaction: the delivery is addressed to this destination/consumer and to
//     the receipt type/schema and projection this consumer produces; the kit canonicalizes the
//     envelope itself and compares its jcs-sha256-v1 digest with the claimed one (mismatch:
//     non-retryable digest_conflict); the envelope is a well-formed EventEnvelope@1
//     (envelope_invalid otherwise); its (eventType, eventSchemaVersion) is supported
//     (unknown_event_type / unsupported_schema otherwise, R-CO-4);
//  2. one transaction (READ COMMITTED, R-CO-2): inbox.read_receipt — a receipt for this event
//     already exists: answer with it, apply nothing (the same ack bytes every time); if Ordered,
//     inbox.observe_revision — 'gap': commit the gap record alone, retryable awaiting_revision,
//     no receipt; 'duplicate': answer with the existing receipt; 'apply': go on; then the user's
//     Apply, inbox.record_receipt, COMMIT, acknowledged with the ack and the receipt.
//     record_receipt gets the canonical envelope bytes, the canonical receipt and the canonical
//     text of its digest candidate (SPEC D-2 hot path): the database checks them with sha256 and
//     cheap text checks and never canonicalizes on this path; the receipt is closed (R-AK-1a:
//     Apply may return only the members registered for the kind, receipt.Members).
//
// OB301 (same event id, different envelope digest) is the non-retryable receipt_conflict;
// transient database failures are the retryable database_unavailable.
package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/wire"
)

// Normalized codes the kit answers with (SPEC R-AK-7).
const (
	CodeAwaitingRevision    = "awaiting_revision"
	CodeDatabaseUnavailable = "database_unavailable"
	CodeCapacityProtection  = "capacity_protection"
	CodeConsumerUnavailable = "consumer_unavailable"
	CodeConsumerTimeout     = "consumer_timeout"
	CodeUnsupportedSchema   = "unsupported_schema"
	CodeUnknownEventType    = "unknown_event_type"
	CodeDigestConflict      = "digest_conflict"
	CodeEnvelopeInvalid     = "envelope_invalid"
	CodeReceiptConflict     = "receipt_conflict"
	CodeConsumerRejected    = "consumer_rejected"
)

// EventKey is an exact (eventType, eventSchemaVersion) pair; no prefix, alias or "latest" (D-4).
type EventKey struct {
	EventType     string
	SchemaVersion string
}

func (k EventKey) String() string { return k.EventType + " (schema " + k.SchemaVersion + ")" }

// Tenant is the tenant block of an EventEnvelope@1.
type Tenant = wire.Tenant

// Event is one delivered event as the user's Apply sees it.
type Event struct {
	EventID            string
	EventType          string
	EventSchemaVersion string
	AggregateID        string
	AggregateRevision  int64
	Tenant             Tenant
	CorrelationID      string // "" when absent
	CausationID        string
	OperationID        string
	OccurredAt         time.Time
	Payload            json.RawMessage
	// Canonical is the RFC 8785 envelope the digest covers; EnvelopeSHA256 its digest, verified
	// by the kit before Apply is called.
	Canonical      []byte
	EnvelopeSHA256 string
	// Delivery is the delivery as the transport handed it over (attempt id, number, ...).
	Delivery wire.Delivery
}

// Key returns the event's (eventType, eventSchemaVersion).
func (e Event) Key() EventKey { return EventKey{e.EventType, e.EventSchemaVersion} }

// ReceiptFields are the kind-specific fields the user's Apply puts into the receipt (covered by
// the receipt digest; integers and strings only, no floats).
type ReceiptFields = receipt.Fields

// ApplyFunc is the user's domain mutation, run inside the kit's transaction under the
// consumer's role. It must not commit or roll back tx. A returned *Error classifies the
// failure; any other error rolls the transaction back and answers retryable
// consumer_unavailable (database_unavailable when it comes from PostgreSQL).
type ApplyFunc func(ctx context.Context, tx pgx.Tx, ev Event) (ReceiptFields, error)

// TxBeginner is what the kit needs from a pool (*pgxpool.Pool satisfies it).
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Config configures one consumer.
type Config struct {
	// Pool connects to the consumer's own database (migrated with the kernel's migrations, so it
	// has the inbox schema). Its login role needs outbox_consumer and the domain tables.
	Pool         TxBeginner
	Destination  string
	ConsumerName string
	ReceiptKind  receipt.Kind
	// ProjectionName/Version: the projection this consumer builds; ""/0 for none. Required for
	// the operations_projection kind.
	ProjectionName    string
	ProjectionVersion int
	// SupportedEvents is the exact set of pairs this consumer applies (R-CO-4).
	SupportedEvents []EventKey
	// Ordered: use inbox.observe_revision per aggregate (R-CO-3). Every revision of an
	// aggregate must then reach this consumer, or it waits for the missing one forever.
	Ordered bool
	Apply   ApplyFunc
	// Role, when set, is SET LOCAL inside every transaction (a superuser or shared pool acting
	// as the consumer's role). Leave empty when the pool's login role is the consumer's.
	Role string
	// HTTP authentication: HMACSecret checks wire.HeaderSignature, BearerToken checks
	// "Authorization: Bearer". A request must pass one configured method; with none
	// configured every HTTP request is refused (401) unless InsecureNoAuth is set (tests).
	// A bearer token is checked before the body is read; an HMAC signature covers the body, so
	// its timestamp and replay checks run first and the body is read under
	// MaxUnauthenticatedReads (docs/transport-http.md, R-SEC-5).
	HMACSecret     []byte
	BearerToken    string
	InsecureNoAuth bool
	// SignatureWindow: a v1 signature whose timestamp is further than this from the consumer's
	// clock (either way) is refused as stale, and every accepted signature is remembered until
	// its timestamp + window so the same signature is refused as replayed (default 5 minutes,
	// at least 1 second).
	SignatureWindow time.Duration
	// AcceptBodyOnlySignature also accepts the obsolete "sha256=<hex HMAC(body)>" signature,
	// which carries no time, destination or attempt and can be replayed at any time. Off by
	// default; only for a migration window with an old dispatcher.
	AcceptBodyOnlySignature bool
	// MaxUnauthenticatedReads bounds the HTTP request bodies read at the same time before their
	// sender is authenticated (HMAC: the signature covers the body); further requests wait for a
	// slot (holding a connection, not a buffer). Default 4; bytes buffered before
	// authentication are at most MaxUnauthenticatedReads x MaxBodyBytes.
	MaxUnauthenticatedReads int
	// MaxConcurrent bounds deliveries in progress (0: unbounded); beyond it the answer is the
	// retryable capacity_protection (HTTP 429).
	MaxConcurrent int
	// MaxBodyBytes bounds an HTTP request body (default 4 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger
	// Now is the receipt clock (default time.Now).
	Now func() time.Time
}

// Consumer is a configured consumer kit instance; safe for concurrent use.
type Consumer struct {
	cfg       Config
	info      receipt.Info
	supported map[EventKey]bool
	types     map[string]bool
	sem       chan struct{}
	log       *slog.Logger
	// HTTP: read slots for unauthenticated bodies, seen signatures, counters.
	unauthSem chan struct{}
	replay    replayCache
	stats     httpCounters
}

// New validates cfg and returns a Consumer.
func New(cfg Config) (*Consumer, error) {
	info, ok := receipt.Lookup(cfg.ReceiptKind)
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("consumer: Pool is required")
	case cfg.Apply == nil:
		return nil, errors.New("consumer: Apply is required")
	case cfg.Destination == "" || cfg.ConsumerName == "":
		return nil, errors.New("consumer: Destination and ConsumerName are required")
	case !ok || cfg.ReceiptKind == receipt.BrokerPublication:
		return nil, fmt.Errorf("consumer: unsupported receipt kind %q", cfg.ReceiptKind)
	case (cfg.ProjectionName == "") != (cfg.ProjectionVersion == 0) || cfg.ProjectionVersion < 0:
		return nil, errors.New("consumer: ProjectionName and ProjectionVersion go together (\"\"/0 for none)")
	case cfg.ReceiptKind == receipt.OperationsProjection && cfg.ProjectionName == "":
		return nil, errors.New("consumer: operations_projection receipts need a projection")
	case len(cfg.SupportedEvents) == 0:
		return nil, errors.New("consumer: SupportedEvents is empty")
	case cfg.MaxConcurrent < 0:
		return nil, errors.New("consumer: MaxConcurrent must be >= 0")
	case cfg.MaxUnauthenticatedReads < 0:
		return nil, errors.New("consumer: MaxUnauthenticatedReads must be >= 0")
	case cfg.SignatureWindow < 0 || (cfg.SignatureWindow > 0 && cfg.SignatureWindow < time.Second):
		return nil, errors.New("consumer: SignatureWindow must be 0 (default 5 minutes) or at least 1 second")
	case cfg.MaxBodyBytes < 0:
		return nil, errors.New("consumer: MaxBodyBytes must be >= 0")
	}
	c := &Consumer{cfg: cfg, info: info, supported: map[EventKey]bool{}, types: map[string]bool{}}
	for _, k := range cfg.SupportedEvents {
		if k.EventType == "" || k.SchemaVersion == "" {
			return nil, fmt.Errorf("consumer: incomplete supported event %v", k)
		}
		c.supported[k] = true
		c.types[k.EventType] = true
	}
	if cfg.MaxConcurrent > 0 {
		c.sem = make(chan struct{}, cfg.MaxConcurrent)
	}
	if c.cfg.MaxBodyBytes <= 0 {
		c.cfg.MaxBodyBytes = 4 << 20
	}
	if c.cfg.MaxUnauthenticatedReads == 0 {
		c.cfg.MaxUnauthenticatedReads = 4
	}
	c.unauthSem = make(chan struct{}, c.cfg.MaxUnauthenticatedReads)
	if c.cfg.SignatureWindow == 0 {
		c.cfg.SignatureWindow = 5 * time.Minute
	}
	c.replay.seen = map[[32]byte]int64{}
	if c.cfg.Now == nil {
		c.cfg.Now = time.Now
	}
	c.log = cfg.Logger
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("destination", cfg.Destination, "consumer", cfg.ConsumerName)
	return c, nil
}

// Destination returns the destination this consumer serves.
func (c *Consumer) Destination() string { return c.cfg.Destination }

// ConsumerName returns the consumer name.
func (c *Consumer) ConsumerName() string { return c.cfg.ConsumerName }

// Error classifies a failure of the user's Apply.
type Error struct {
	Status wire.Status // wire.Retryable or wire.NonRetryable
	Code   string      // a normalized code of that class (SPEC R-AK-7)
	Ref    string      // sanitized reference, no payload content
	Err    error
}

func (e *Error) Error() string {
	s := e.Status.String() + " " + e.Code
	if e.Ref != "" {
		s += " (" + e.Ref + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Retry returns an Apply error answering retryable code (e.g. awaiting_revision while a fact
// the event depends on is not readable yet): the transaction rolls back, no receipt is written.
func Retry(code, ref string, err error) error {
	return &Error{Status: wire.Retryable, Code: code, Ref: ref, Err: err}
}

// Reject returns an Apply error answering non-retryable code (the source quarantines the
// delivery): the transaction rolls back, no receipt is written.
func Reject(code, ref string, err error) error {
	return &Error{Status: wire.NonRetryable, Code: code, Ref: ref, Err: err}
}
