// Package consumer is the consumer kit of SPEC §6 (R-CO-1..5): it wraps a user function
//
//	apply(ctx, tx, event) (receiptFields, error)
//
// so that the revision check, the user's domain mutation and the content-addressed receipt
// commit in ONE PostgreSQL transaction, and answers every delivery with an ActiveConsumerAck@1
// (acknowledged), a retryable code or a non-retryable code. A Consumer serves both the
// dispatcher's in-process registry transport (it implements wire.Consumer) and the HTTP
// transport (it implements http.Handler, docs/transport-http.md). With Config.Mutate instead of
// Apply a delivery is one round trip (inbox.accept_delivery, the handler's statements and
// inbox.confirm_delivery, pipelined).
//
// How one delivery is handled, step by step: docs/contract.md#package-consumer-the-consumer-kit.
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

// MutateFunc is the user's domain mutation as statements, for the one-round-trip path
// (Config.Mutate): it queues the statements on q — it cannot read — and returns the receipt
// fields. The kit sends inbox.accept_delivery, these statements and inbox.confirm_delivery as
// one pipelined chain in one transaction (R-CO-2); when accept_delivery finds the event already
// received (or, ordered, a revision gap or an already applied revision), confirm_delivery rolls
// the chain back, statements included. Statements therefore run, and are rolled back, on a
// redelivery: keep them free of effects outside the transaction (a sequence still advances).
// Use the same SQL texts every time (pgx prepares a new text once per connection, one extra
// round trip). A returned *Error classifies the failure; nothing is sent then.
type MutateFunc func(ev Event, q *Queue) (ReceiptFields, error)

// Queue collects a MutateFunc's statements.
type Queue struct{ stmts []queuedStmt }

type queuedStmt struct {
	sql  string
	args []any
}

// Exec queues one statement (its rows, if any, are discarded).
func (q *Queue) Exec(sql string, args ...any) { q.stmts = append(q.stmts, queuedStmt{sql, args}) }

// Len is the number of queued statements.
func (q *Queue) Len() int { return len(q.stmts) }

// TxBeginner is what the kit needs from a pool (*pgxpool.Pool satisfies it).
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Batcher sends a pipelined batch (*pgxpool.Pool satisfies it); Config.Mutate needs a Pool that
// is one.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Config configures one consumer.
type Config struct {
	// Pool connects to the consumer's own database (migrated with the kernel's migrations, so it
	// has the inbox schema). Its login role needs outbox_consumer and the domain tables.
	Pool         TxBeginner
	Destination  string
	ConsumerName string
	// ReceiptKind is a kind registered in the database (outbox.receipt_kinds), e.g. one a
	// registrar added at runtime; its rules come from Catalog.
	ReceiptKind receipt.Kind
	// Catalog holds the receipt kinds the kit builds receipts with. nil (the usual case): New
	// loads it from the database through Pool (receipt.LoadCatalog, outbox.receipt_kind_catalog,
	// as Role when set), so a kind registered before the kit starts is known (SPEC §13).
	Catalog *receipt.Catalog
	// ProjectionName/Version: the projection this consumer builds; ""/0 for none. Required for
	// a kind registered with requires_projection.
	ProjectionName    string
	ProjectionVersion int
	// BuildToken is set only on a kit that writes a shadow projection version during its rebuild
	// (ProjectionVersion is then the shadow's; Consumer.Rebuild): the live token of
	// outbox.start_shadow_build, passed to every inbox call (SPEC R-PV-1). Empty otherwise.
	BuildToken string
	// DualApply keeps a second version of the same projection current beside ProjectionVersion
	// during a cutover (SPEC R-PV-2 (b), R-PV-3): every delivery is applied, in ONE inbox
	// transaction, to the version its frozen member targets (whose receipt acknowledges it) and to
	// this one (its own receipt). Deliveries targeting either version are accepted. Before the
	// switch: the shadow with its live build token; after it, the former version (frozen, no
	// token) through the rollback window. Apply path only (not Mutate).
	DualApply *DualTarget
	// SupportedEvents is the exact set of pairs this consumer applies (R-CO-4).
	SupportedEvents []EventKey
	// Ordered: use inbox.observe_revision per aggregate (R-CO-3). Every revision of an
	// aggregate must then reach this consumer, or it waits for the missing one forever.
	Ordered bool
	// Apply or Mutate (exactly one): Apply runs inside a transaction the kit opened and may read
	// (several round trips per delivery); Mutate only queues statements, and a delivery is then
	// one database round trip on the success path and on a redelivery (MutateFunc).
	Apply  ApplyFunc
	Mutate MutateFunc
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
	// sender is authenticated — only requests with the obsolete body-only signature
	// (AcceptBodyOnlySignature): a v1 signature and a bearer token are checked from the headers
	// before the body is read. Further such requests wait for a slot (holding a connection, not
	// a buffer), the most recent first. Default 4; bytes buffered before authentication are at
	// most MaxUnauthenticatedReads x MaxBodyBytes.
	MaxUnauthenticatedReads int
	// UnauthenticatedReadGrace and MinUnauthenticatedBodyRate bound one unauthenticated read:
	// it must be complete by grace + bytes received / rate after its slot was granted (defaults
	// 2 s and 65536 bytes/s), else it is cut (408, nothing applied).
	UnauthenticatedReadGrace   time.Duration
	MinUnauthenticatedBodyRate int64
	// UnauthenticatedStall: while a request waits for a slot, a slot holder that has received no
	// byte for this long loses its slot at once (408). Default 250 ms.
	UnauthenticatedStall time.Duration
	// MaxConcurrent bounds deliveries in progress (0: unbounded); beyond it the answer is the
	// retryable capacity_protection (HTTP 429).
	MaxConcurrent int
	// MaxBodyBytes bounds an HTTP request body (default 4 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger
	// Now is the receipt clock (default time.Now).
	Now func() time.Time
}

// DualTarget is the second projection version of Config.DualApply: its version, the Apply that
// writes its tables, and the build token while it is a shadow ("" for an active or frozen one).
type DualTarget struct {
	ProjectionVersion int
	Apply             ApplyFunc
	BuildToken        string
}

// Consumer is a configured consumer kit instance; safe for concurrent use.
type Consumer struct {
	cfg      Config
	info     receipt.Info
	receipts *receipt.Catalog
	// eventFields: the kind requires the eventType/eventSchemaVersion members, so the kit's
	// receipts carry the event's (outbox.receipt_kind_members).
	eventFields bool
	supported   map[EventKey]bool
	types       map[string]bool
	sem         chan struct{}
	batcher     Batcher
	log         *slog.Logger
	// HTTP: read slots for unauthenticated bodies, seen signatures, counters.
	slots  *slotPool
	replay replayCache
	stats  httpCounters
}

// ErrCatalogUnavailable wraps the error of New when the receipt catalog could not be read from
// the database (unreachable, or the role lacks EXECUTE on outbox.receipt_kind_catalog): the
// configuration itself was accepted, so New may be called again once the database answers.
var ErrCatalogUnavailable = errors.New("receipt catalog unavailable")

// New validates cfg, loads the receipt catalog from the database when cfg.Catalog is nil, checks
// the receipt kind against it and returns a Consumer. The checks that need no database run
// first: an error wrapping ErrCatalogUnavailable means only the catalog is missing.
func New(ctx context.Context, cfg Config) (*Consumer, error) {
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("consumer: Pool is required")
	case (cfg.Apply == nil) == (cfg.Mutate == nil):
		return nil, errors.New("consumer: exactly one of Apply and Mutate is required")
	case cfg.Destination == "" || cfg.ConsumerName == "":
		return nil, errors.New("consumer: Destination and ConsumerName are required")
	case cfg.BuildToken != "" && (cfg.Mutate != nil || cfg.ProjectionName == ""):
		return nil, errors.New("consumer: a BuildToken kit writes a shadow projection version through Apply")
	case cfg.DualApply != nil && (cfg.Mutate != nil || cfg.ProjectionName == "" || cfg.DualApply.Apply == nil ||
		cfg.DualApply.ProjectionVersion < 1 || cfg.DualApply.ProjectionVersion == cfg.ProjectionVersion):
		return nil, errors.New("consumer: DualApply needs Apply, a projection and another version with its own Apply")
	case cfg.ReceiptKind == receipt.BrokerPublication:
		return nil, fmt.Errorf("consumer: receipt kind %q is built by the dispatcher's broker transport only", cfg.ReceiptKind)
	case (cfg.ProjectionName == "") != (cfg.ProjectionVersion == 0) || cfg.ProjectionVersion < 0:
		return nil, errors.New("consumer: ProjectionName and ProjectionVersion go together (\"\"/0 for none)")
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
	case cfg.UnauthenticatedReadGrace < 0 || cfg.MinUnauthenticatedBodyRate < 0 || cfg.UnauthenticatedStall < 0:
		return nil, errors.New("consumer: UnauthenticatedReadGrace, MinUnauthenticatedBodyRate and UnauthenticatedStall must be >= 0 (0: default)")
	}
	cat := cfg.Catalog
	if cat == nil {
		var err error
		if cat, err = loadCatalog(ctx, cfg.Pool, cfg.Role); err != nil {
			return nil, fmt.Errorf("consumer: %w: %w", ErrCatalogUnavailable, err)
		}
	}
	info, ok := cat.Lookup(cfg.ReceiptKind)
	switch {
	case !ok:
		return nil, fmt.Errorf("consumer: receipt kind %q is not registered (outbox.receipt_kinds)", cfg.ReceiptKind)
	case info.RequiresProjection && cfg.ProjectionName == "":
		return nil, fmt.Errorf("consumer: %s receipts need a projection", cfg.ReceiptKind)
	}
	c := &Consumer{cfg: cfg, info: info, receipts: cat, supported: map[EventKey]bool{}, types: map[string]bool{}}
	for _, m := range info.Members {
		if m.Required && (m.Name == "eventType" || m.Name == "eventSchemaVersion") {
			c.eventFields = true
		}
	}
	if cfg.Mutate != nil {
		b, ok := cfg.Pool.(Batcher)
		if !ok {
			return nil, errors.New("consumer: Mutate needs a Pool with SendBatch (a *pgxpool.Pool)")
		}
		c.batcher = b
	}
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
	if c.cfg.UnauthenticatedReadGrace == 0 {
		c.cfg.UnauthenticatedReadGrace = 2 * time.Second
	}
	if c.cfg.MinUnauthenticatedBodyRate == 0 {
		c.cfg.MinUnauthenticatedBodyRate = 64 << 10
	}
	if c.cfg.UnauthenticatedStall == 0 {
		c.cfg.UnauthenticatedStall = 250 * time.Millisecond
	}
	c.slots = newSlotPool(c.cfg.MaxUnauthenticatedReads, c.cfg.UnauthenticatedStall)
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

// loadCatalog reads the receipt catalog in a read-only transaction on pool, as role when set.
func loadCatalog(ctx context.Context, pool TxBeginner, role string) (*receipt.Catalog, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if role != "" {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
			return nil, err
		}
	}
	return receipt.LoadCatalog(ctx, tx)
}

// Catalog returns the receipt catalog the kit builds its receipts with.
func (c *Consumer) Catalog() *receipt.Catalog { return c.receipts }

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
