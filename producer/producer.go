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
//	res, err := producer.Append(ctx, tx, producer.Event{EventType: "order.placed@1", ...})
//	if errors.Is(err, producer.ErrNotApplicable) { ... }
//	tx.Commit(ctx) // the deferred anti-join runs here (ErrDeliverySetIncomplete)
//
// Trace context (SPEC R-DP-7): when ctx carries an active OpenTelemetry span, its W3C
// traceparent/tracestate is stored beside the event (never inside the envelope or its digest)
// and travels to the consumers as headers; without one nothing is sent (package tracing).
package producer

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/tracing"
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
	if c, ok := canonicalEnvelope(ev); ok {
		text, digest := string(c), canon.SumHex(c)
		tp, ts := tracing.FromContext(ctx)
		r, err := pgcall.AppendEvent(ctx, db, pgcall.AppendParams{Event: c, CanonicalText: &text, EnvelopeSHA256: &digest,
			TraceParent: tp, TraceState: ts})
		if err != nil {
			return Result{}, err
		}
		return Result{EventID: r.EventID, EnvelopeSHA256: r.EnvelopeSHA256, DeliveryCount: r.DeliveryCount}, nil
	}
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
	tp, ts := tracing.FromContext(ctx)
	r, err := pgcall.AppendEvent(ctx, db, pgcall.AppendParams{Event: c, CanonicalText: &text, EnvelopeSHA256: &digest,
		TraceParent: tp, TraceState: ts})
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
		c, ok := canonicalEnvelope(ev)
		if !ok { // the general path decides, with its own errors
			doc, _, err := Envelope(ev)
			if err != nil {
				return nil, fmt.Errorf("append events: event %d: %w", i, err)
			}
			if c, _, err = canonical(fmt.Sprintf("append events: event %d", i), doc); err != nil {
				return nil, err
			}
		}
		digest := canon.SumHex(c)
		if i > 0 {
			events = append(events, ',')
		}
		events = append(events, c...)
		text := string(c)
		texts[i], digests[i] = &text, &digest
	}
	events = append(events, ']')
	tp, ts := tracing.FromContext(ctx)
	rs, err := pgcall.AppendEvents(ctx, db, pgcall.AppendEventsParams{Events: events, CanonicalTexts: texts, EnvelopeSHA256s: digests,
		TraceParent: tp, TraceState: ts})
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(rs))
	for i, r := range rs {
		out[i] = Result{EventID: r.EventID, EnvelopeSHA256: r.EnvelopeSHA256, DeliveryCount: r.DeliveryCount}
	}
	return out, nil
}

// canonicalEnvelope returns the RFC 8785 canonical text of ev's EventEnvelope@1 (EventID and
// OccurredAt filled when empty), the same bytes as canonicalizing Envelope(ev) (P-6: the
// producer's own CPU per event): the envelope's members are written in their canonical order
// with RFC 8785 string escaping, and only the payload goes through the canonicalizer. It
// reports false, and the caller takes the general path (Envelope, then the canonicalizer, with
// their errors), for anything it does not write itself: a payload the canonicalizer refuses, an
// aggregateRevision outside the safe integers, a string that is not valid UTF-8 or holds U+0000.
func canonicalEnvelope(ev Event) ([]byte, bool) {
	if ev.EventID == "" {
		ev.EventID = newUUID()
	}
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = time.Now()
	}
	payload := []byte(ev.Payload)
	if len(payload) == 0 {
		payload = []byte(`{}`)
	}
	p, err := canon.Canonicalize(payload)
	if err != nil || ev.AggregateRevision > canon.MaxSafeInteger || ev.AggregateRevision < -canon.MaxSafeInteger {
		return nil, false
	}
	b := make([]byte, 0, len(p)+512)
	var ok = true
	str := func(name, v string, optional bool) {
		if optional && v == "" {
			return
		}
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		var good bool
		b, good = appendJCSString(b, v)
		ok = ok && good
	}
	b = append(b, '{')
	str("aggregateId", ev.AggregateID, false)
	b = append(b, `,"aggregateRevision":`...)
	b = strconv.AppendInt(b, ev.AggregateRevision, 10)
	str("causationId", ev.CausationID, true)
	str("correlationId", ev.CorrelationID, true)
	str("eventId", ev.EventID, false)
	str("eventSchemaVersion", ev.EventSchemaVersion, false)
	str("eventType", ev.EventType, false)
	str("occurredAt", ev.OccurredAt.UTC().Truncate(time.Microsecond).Format(OccurredAtFormat), false)
	str("operationId", ev.OperationID, true)
	b = append(b, `,"payload":`...)
	b = append(b, p...)
	b = append(b, `,"tenant":{`...)
	str("projectId", ev.Tenant.ProjectID, true)
	str("tenantId", ev.Tenant.TenantID, false)
	str("tenantKind", ev.Tenant.TenantKind, false)
	str("workspaceId", ev.Tenant.WorkspaceID, false)
	b = append(b, '}', '}')
	return b, ok
}

// appendJCSString appends s as an RFC 8785 string (ECMAScript JSON.stringify escaping: \" \\
// \b \f \n \r \t, \u00xx in lower-case hex for the other control characters, everything else
// literal). It reports false for invalid UTF-8 and for U+0000 (outside jcs-sha256-v1).
func appendJCSString(b []byte, s string) ([]byte, bool) {
	const hex = "0123456789abcdef"
	ok := utf8.ValidString(s)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b = append(b, '\\', '"')
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == 0:
			ok = false
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"'), ok
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
