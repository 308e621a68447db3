// Package producer appends events to the pgoutbox kernel inside the caller's own pgx
// transaction (SPEC §3.2). It builds the EventEnvelope@1, computes its RFC 8785 canonical text
// and jcs-sha256-v1 digest in Go, and hands both to outbox.append_event — or many events at once
// to outbox.append_events (AppendMany) — on the D-2 hot path: the database verifies them and
// never stores a digest it did not check. Every rule (applicability,
// refinements, size limit, delivery-set completeness at COMMIT) is enforced by the database;
// this package only shapes the call and maps SQLSTATEs to typed errors.
//
//	tx, _ := pool.Begin(ctx)
//	// ... business writes ...
//	res, err := producer.Append(ctx, tx, producer.Event{EventType: "run.created@2.0", ...})
//	if errors.Is(err, producer.ErrNotApplicable) { ... }
//	tx.Commit(ctx) // the deferred anti-join runs here (ErrDeliverySetIncomplete)
package producer

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/wire"
)

// DBTX is satisfied by pgx.Tx (the usual case), *pgx.Conn and *pgxpool.Pool.
type DBTX = pgcall.DBTX

// Typed errors for the kernel's SQLSTATEs; test with errors.Is.
var (
	ErrNotApplicable         = pgcall.ErrNotApplicable         // OB103: pair not applicable / no active delivery set
	ErrDeliverySetIncomplete = pgcall.ErrDeliverySetIncomplete // OB104: raised by COMMIT
	ErrEnvelopeInvalid       = pgcall.ErrEnvelopeInvalid       // OB105: envelope rules, size limit, digest
	ErrNotCanonicalizable    = pgcall.ErrNotCanonicalizable    // OB201 (and Go-side canonicalization failures)
	ErrPermissionDenied      = pgcall.ErrPermissionDenied      // 42501: the role lacks outbox_producer
)

// Tenant is the tenant block of the envelope.
type Tenant = wire.Tenant

// Event is what a producer supplies. EventID and OccurredAt are generated when empty/zero.
type Event struct {
	EventID            string
	EventType          string
	EventSchemaVersion string
	AggregateID        string
	AggregateRevision  int64
	Tenant             Tenant
	CorrelationID      string
	CausationID        string
	OperationID        string
	OccurredAt         time.Time
	Payload            json.RawMessage
}

// Result is what the database returns for an appended event.
type Result struct {
	EventID        string
	EnvelopeSHA256 string
	DeliveryCount  int
}

type envelope struct {
	EventID            string          `json:"eventId"`
	EventType          string          `json:"eventType"`
	EventSchemaVersion string          `json:"eventSchemaVersion"`
	AggregateID        string          `json:"aggregateId"`
	AggregateRevision  int64           `json:"aggregateRevision"`
	Tenant             Tenant          `json:"tenant"`
	CorrelationID      string          `json:"correlationId,omitempty"`
	CausationID        string          `json:"causationId,omitempty"`
	OperationID        string          `json:"operationId,omitempty"`
	OccurredAt         string          `json:"occurredAt"`
	Payload            json.RawMessage `json:"payload"`
}

// OccurredAtFormat is the envelope's time format (SPEC D-3): UTC, six fractional digits, Z.
const OccurredAtFormat = "2006-01-02T15:04:05.000000Z"

// Envelope returns the EventEnvelope@1 document for ev (filling EventID and OccurredAt when
// empty) and the event id used.
func Envelope(ev Event) (json.RawMessage, string, error) {
	if ev.EventID == "" {
		ev.EventID = newUUID()
	}
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = time.Now()
	}
	if len(ev.Payload) == 0 {
		ev.Payload = json.RawMessage(`{}`)
	}
	doc, err := json.Marshal(envelope{
		EventID: ev.EventID, EventType: ev.EventType, EventSchemaVersion: ev.EventSchemaVersion,
		AggregateID: ev.AggregateID, AggregateRevision: ev.AggregateRevision, Tenant: ev.Tenant,
		CorrelationID: ev.CorrelationID, CausationID: ev.CausationID, OperationID: ev.OperationID,
		OccurredAt: ev.OccurredAt.UTC().Truncate(time.Microsecond).Format(OccurredAtFormat),
		Payload:    ev.Payload,
	})
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrEnvelopeInvalid, err)
	}
	return doc, ev.EventID, nil
}

// Append appends ev inside db (normally the caller's business transaction) on the hot path:
// canonical text and digest computed here, verified by the database.
func Append(ctx context.Context, db DBTX, ev Event) (Result, error) {
	doc, _, err := Envelope(ev)
	if err != nil {
		return Result{}, err
	}
	return AppendDocument(ctx, db, doc)
}

// AppendDocument appends an already built EventEnvelope@1 document (it must carry eventId and
// occurredAt) on the hot path. The document is sent as its canonical text, which is also the
// event itself: the database then checks the text once (SPEC D-2).
func AppendDocument(ctx context.Context, db DBTX, doc json.RawMessage) (Result, error) {
	c, digest, err := canonical("append event", doc)
	if err != nil {
		return Result{}, err
	}
	text := string(c)
	r, err := pgcall.AppendEvent(ctx, db, pgcall.AppendParams{Event: c, CanonicalText: &text, EnvelopeSHA256: &digest})
	if err != nil {
		return Result{}, err
	}
	return Result{EventID: r.EventID, EnvelopeSHA256: r.EnvelopeSHA256, DeliveryCount: r.DeliveryCount}, nil
}

// AppendMany appends evs inside db (normally the caller's business transaction) with one call
// of outbox.append_events, on the hot path: canonical texts and digests computed here, verified
// by the database. The results are in the order of evs. Any invalid event fails the whole call
// and appends nothing (the caller's transaction decides what else to roll back); an event whose
// eventId was already appended with the same envelope comes back unchanged (idempotent).
func AppendMany(ctx context.Context, db DBTX, evs []Event) ([]Result, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	var events []byte
	texts := make([]*string, len(evs))
	digests := make([]*string, len(evs))
	events = append(events, '[')
	for i, ev := range evs {
		doc, _, err := Envelope(ev)
		if err != nil {
			return nil, fmt.Errorf("append events: event %d: %w", i, err)
		}
		c, digest, err := canonical(fmt.Sprintf("append events: event %d", i), doc)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			events = append(events, ',')
		}
		events = append(events, c...)
		text := string(c)
		texts[i], digests[i] = &text, &digest
	}
	events = append(events, ']')
	rs, err := pgcall.AppendEvents(ctx, db, pgcall.AppendEventsParams{Events: events, CanonicalTexts: texts, EnvelopeSHA256s: digests})
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(rs))
	for i, r := range rs {
		out[i] = Result{EventID: r.EventID, EnvelopeSHA256: r.EnvelopeSHA256, DeliveryCount: r.DeliveryCount}
	}
	return out, nil
}

// canonical returns the RFC 8785 canonical text of doc and its jcs-sha256-v1 digest, mapping a
// refusal to ErrNotCanonicalizable.
func canonical(call string, doc json.RawMessage) ([]byte, string, error) {
	c, digest, err := canon.CanonicalizeDigest(doc)
	if err != nil {
		if errors.Is(err, canon.ErrNotCanonicalizable) {
			return nil, "", fmt.Errorf("%s: %w: %v", call, ErrNotCanonicalizable, err)
		}
		return nil, "", fmt.Errorf("%s: %w", call, err)
	}
	return c, digest, nil
}

// newUUID returns a random version-4 UUID in canonical lower-case form.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
