package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/wire"
)

var _ wire.Consumer = (*Consumer)(nil)

// Deliver handles one delivery (the in-process adapter of the dispatcher's registry
// transport). The answer is always in the Result; the error is always nil.
func (c *Consumer) Deliver(ctx context.Context, d wire.Delivery) (wire.Result, error) {
	if c.sem != nil {
		select {
		case c.sem <- struct{}{}:
			defer func() { <-c.sem }()
		default:
			return c.answer(d, retryable(CodeCapacityProtection, "max_concurrent")), nil
		}
	}
	ev, res, ok := c.check(d)
	if !ok {
		return c.answer(d, res), nil
	}
	return c.answer(d, c.handle(ctx, ev)), nil
}

func retryable(code, ref string) wire.Result {
	return wire.Result{Status: wire.Retryable, Code: code, Ref: ref}
}

func nonRetryable(code, ref string) wire.Result {
	return wire.Result{Status: wire.NonRetryable, Code: code, Ref: ref}
}

// answer logs the outcome (sanitized: ids and codes, never payloads) and returns it.
func (c *Consumer) answer(d wire.Delivery, r wire.Result) wire.Result {
	attrs := []any{"event_id", d.EventID, "attempt_id", d.AttemptID, "status", r.Status.String()}
	switch r.Status {
	case wire.Acknowledged:
		c.log.Debug("delivery acknowledged", attrs...)
	case wire.Retryable:
		c.log.Info("delivery retryable", append(attrs, "code", r.Code, "ref", r.Ref)...)
	default:
		c.log.Warn("delivery rejected", append(attrs, "code", r.Code, "ref", r.Ref)...)
	}
	return r
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// envelope is EventEnvelope@1 (SPEC D-3), decoded strictly.
type envelope struct {
	EventID            *string         `json:"eventId"`
	EventType          *string         `json:"eventType"`
	EventSchemaVersion *string         `json:"eventSchemaVersion"`
	AggregateID        *string         `json:"aggregateId"`
	AggregateRevision  *int64          `json:"aggregateRevision"`
	Tenant             *Tenant         `json:"tenant"`
	CorrelationID      *string         `json:"correlationId"`
	CausationID        *string         `json:"causationId"`
	OperationID        *string         `json:"operationId"`
	OccurredAt         *string         `json:"occurredAt"`
	Payload            json.RawMessage `json:"payload"`
}

// check runs every verification that needs no database (step 1 of the package doc).
func (c *Consumer) check(d wire.Delivery) (Event, wire.Result, bool) {
	if d.Destination != c.cfg.Destination || d.ConsumerName != c.cfg.ConsumerName {
		// A routing/configuration error, not a property of the event: retry once fixed.
		return Event{}, retryable(CodeConsumerUnavailable, "misrouted"), false
	}
	if (d.ExpectedReceiptType != "" && d.ExpectedReceiptType != c.info.ReceiptType) ||
		(d.ExpectedReceiptSchemaVersion != 0 && d.ExpectedReceiptSchemaVersion != c.info.SchemaVersion) {
		return Event{}, nonRetryable(CodeUnsupportedSchema, "receipt_contract"), false
	}
	if d.RequiredProjectionName != "" &&
		(d.RequiredProjectionName != c.cfg.ProjectionName || d.RequiredProjectionVersion != c.cfg.ProjectionVersion) {
		return Event{}, nonRetryable(CodeUnsupportedSchema, "projection_target"), false
	}
	if d.EnvelopeDigestAlgorithmVersion != "" && d.EnvelopeDigestAlgorithmVersion != canon.Algorithm {
		return Event{}, nonRetryable(CodeUnsupportedSchema, "digest_algorithm"), false
	}
	if d.EnvelopeSHA256 == "" {
		return Event{}, nonRetryable(CodeEnvelopeInvalid, "missing_digest"), false
	}
	// R-CO-1 / D-2: the kit computes the digest itself; it never trusts the claimed one.
	canonical, err := canon.Canonicalize(d.Envelope)
	if err != nil {
		return Event{}, nonRetryable(CodeEnvelopeInvalid, "not_canonicalizable"), false
	}
	sha, err := canon.SHA256Hex(canonical)
	if err != nil {
		return Event{}, nonRetryable(CodeEnvelopeInvalid, "not_canonicalizable"), false
	}
	if sha != d.EnvelopeSHA256 {
		return Event{}, nonRetryable(CodeDigestConflict, "envelope_sha256"), false
	}
	ev, err := parseEnvelope(canonical)
	if err != nil {
		return Event{}, nonRetryable(CodeEnvelopeInvalid, "envelope_fields"), false
	}
	if d.EventID != "" && d.EventID != ev.EventID {
		return Event{}, nonRetryable(CodeEnvelopeInvalid, "event_id"), false
	}
	ev.Canonical, ev.EnvelopeSHA256, ev.Delivery = canonical, sha, d
	if !c.supported[ev.Key()] {
		if c.types[ev.EventType] {
			return Event{}, nonRetryable(CodeUnsupportedSchema, "event_schema_version"), false
		}
		return Event{}, nonRetryable(CodeUnknownEventType, "event_type"), false
	}
	return ev, wire.Result{}, true
}

func parseEnvelope(canonical []byte) (Event, error) {
	// D-3: absent optional fields are omitted, never null.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &top); err != nil {
		return Event{}, err
	}
	for _, v := range top {
		if string(v) == "null" {
			return Event{}, errors.New("null envelope field")
		}
	}
	if t, ok := top["tenant"]; ok {
		var tenant map[string]json.RawMessage
		if err := json.Unmarshal(t, &tenant); err != nil {
			return Event{}, err
		}
		for _, v := range tenant {
			if string(v) == "null" {
				return Event{}, errors.New("null tenant field")
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.DisallowUnknownFields()
	var e envelope
	if err := dec.Decode(&e); err != nil {
		return Event{}, err
	}
	if e.EventID == nil || !uuidRE.MatchString(*e.EventID) || e.EventType == nil || *e.EventType == "" ||
		e.EventSchemaVersion == nil || *e.EventSchemaVersion == "" || e.AggregateID == nil || *e.AggregateID == "" ||
		e.AggregateRevision == nil || *e.AggregateRevision <= 0 || e.Tenant == nil || e.Tenant.TenantKind == "" ||
		e.Tenant.TenantID == "" || e.Tenant.WorkspaceID == "" || e.OccurredAt == nil || len(e.Payload) == 0 {
		return Event{}, errors.New("missing or invalid envelope field")
	}
	at, err := time.Parse(receipt.TimeLayout, *e.OccurredAt)
	if err != nil {
		return Event{}, fmt.Errorf("occurredAt: %w", err)
	}
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return Event{
		EventID: *e.EventID, EventType: *e.EventType, EventSchemaVersion: *e.EventSchemaVersion,
		AggregateID: *e.AggregateID, AggregateRevision: *e.AggregateRevision, Tenant: *e.Tenant,
		CorrelationID: s(e.CorrelationID), CausationID: s(e.CausationID), OperationID: s(e.OperationID),
		OccurredAt: at, Payload: e.Payload,
	}, nil
}

func (c *Consumer) begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := c.cfg.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	if c.cfg.Role != "" {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{c.cfg.Role}.Sanitize()); err != nil {
			_ = tx.Rollback(ctx)
			return nil, err
		}
	}
	return tx, nil
}

func (c *Consumer) readParams(ev Event) pgcall.ReadReceiptParams {
	return pgcall.ReadReceiptParams{ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: c.cfg.ProjectionVersion, EventID: ev.EventID, EnvelopeSHA256: ev.EnvelopeSHA256}
}

// handle is step 2 of the package doc: one transaction.
func (c *Consumer) handle(ctx context.Context, ev Event) wire.Result {
	tx, err := c.begin(ctx)
	if err != nil {
		return c.dbFailure(ctx, "begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after Commit

	doc, err := pgcall.ReadReceipt(ctx, tx, c.readParams(ev))
	if err != nil {
		return c.dbFailure(ctx, "read receipt", err)
	}
	if doc != nil {
		return c.acknowledged(doc) // R-CO-1: redelivery → the first receipt, nothing applied
	}

	if c.cfg.Ordered {
		outcome, err := pgcall.ObserveRevision(ctx, tx, pgcall.ObserveRevisionParams{
			ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
			ProjectionVersion: c.cfg.ProjectionVersion, AggregateID: ev.AggregateID,
			AggregateRevision: ev.AggregateRevision})
		if err != nil {
			return c.dbFailure(ctx, "observe revision", err)
		}
		switch outcome {
		case pgcall.RevisionGap:
			// R-CO-3: keep the gap record (the only write of this transaction), no receipt.
			if err := tx.Commit(ctx); err != nil {
				return c.dbFailure(ctx, "commit gap", err)
			}
			return retryable(CodeAwaitingRevision, "revision_gap")
		case pgcall.RevisionDuplicate:
			// A concurrent delivery of the same event may have committed meanwhile.
			doc, err := pgcall.ReadReceipt(ctx, tx, c.readParams(ev))
			if err != nil {
				return c.dbFailure(ctx, "read receipt", err)
			}
			if doc != nil {
				return c.acknowledged(doc)
			}
			// Another event already holds this aggregate revision: never guess, let it be seen.
			return nonRetryable(CodeConsumerRejected, "revision_already_applied")
		case pgcall.RevisionApply:
		default:
			return retryable(CodeConsumerUnavailable, "observe_revision_outcome")
		}
	}

	fields, err := c.cfg.Apply(ctx, tx, ev)
	if err != nil {
		return c.applyFailure(ctx, err)
	}
	built, err := receipt.Build(c.cfg.ReceiptKind, receipt.Params{
		Destination: c.cfg.Destination, ConsumerName: c.cfg.ConsumerName, EventID: ev.EventID,
		EventEnvelopeSHA256: ev.EnvelopeSHA256, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: c.cfg.ProjectionVersion, EventType: c.eventTypeField(ev),
		EventSchemaVersion: c.eventSchemaField(ev), Time: c.cfg.Now(), Fields: fields})
	if err != nil {
		// A defect of Apply's fields, fixable by a deploy: retried (and quarantined as
		// retry_exhausted if it persists), never acknowledged.
		c.log.Error("receipt fields rejected", "event_id", ev.EventID, "err", err)
		return retryable(CodeConsumerUnavailable, "receipt_fields")
	}
	// D-2 hot path: the canonical envelope bytes, the canonical receipt and the canonical text of
	// its digest candidate, so that the database verifies (sha256, cheap text checks) instead of
	// canonicalizing in PL/pgSQL; same transaction as Apply (R-CO-2).
	rec, err := pgcall.RecordReceipt(ctx, tx, pgcall.RecordReceiptParams{
		ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: c.cfg.ProjectionVersion, EventEnvelope: ev.Canonical, Receipt: built.Receipt,
		DigestCandidate: built.Candidate})
	if err != nil {
		return c.dbFailure(ctx, "record receipt", err)
	}
	if rec.Outcome == pgcall.ReceiptExisting {
		// A concurrent delivery won: discard this transaction's mutation, answer with its receipt.
		_ = tx.Rollback(ctx)
		return c.readExisting(ctx, ev)
	}
	if rec.Ref != built.Ref || rec.Digest != built.Digest {
		c.log.Error("receipt digest differs between the kit and the database", "event_id", ev.EventID)
		return retryable(CodeConsumerUnavailable, "receipt_digest_drift")
	}
	if err := tx.Commit(ctx); err != nil {
		return c.dbFailure(ctx, "commit", err)
	}
	return wire.Result{Status: wire.Acknowledged, Ack: built.Ack, Receipt: built.Receipt}
}

// The operations receipt carries the event type/schema (R-AK-1a); other kinds do not.
func (c *Consumer) eventTypeField(ev Event) string {
	if c.cfg.ReceiptKind == receipt.OperationsProjection {
		return ev.EventType
	}
	return ""
}

func (c *Consumer) eventSchemaField(ev Event) string {
	if c.cfg.ReceiptKind == receipt.OperationsProjection {
		return ev.EventSchemaVersion
	}
	return ""
}

func (c *Consumer) readExisting(ctx context.Context, ev Event) wire.Result {
	tx, err := c.begin(ctx)
	if err != nil {
		return c.dbFailure(ctx, "begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	doc, err := pgcall.ReadReceipt(ctx, tx, c.readParams(ev))
	if err != nil {
		return c.dbFailure(ctx, "read receipt", err)
	}
	if doc == nil {
		return retryable(CodeDatabaseUnavailable, "receipt_not_visible")
	}
	return c.acknowledged(doc)
}

func (c *Consumer) acknowledged(doc []byte) wire.Result {
	d, err := receipt.Parse(doc)
	if err != nil {
		c.log.Error("stored receipt unreadable", "err", err)
		return retryable(CodeConsumerUnavailable, "stored_receipt")
	}
	return wire.Result{Status: wire.Acknowledged, Ack: d.Ack, Receipt: d.Receipt}
}

func (c *Consumer) applyFailure(ctx context.Context, err error) wire.Result {
	var ke *Error
	if errors.As(err, &ke) && (ke.Status == wire.Retryable || ke.Status == wire.NonRetryable) && ke.Code != "" {
		return wire.Result{Status: ke.Status, Code: ke.Code, Ref: ke.Ref}
	}
	if isDBError(err) {
		return c.dbFailure(ctx, "apply", err)
	}
	if ctx.Err() != nil {
		return retryable(CodeConsumerTimeout, "apply")
	}
	c.log.Warn("apply failed", "err", err)
	return retryable(CodeConsumerUnavailable, "apply")
}

func isDBError(err error) bool {
	var pgErr *pgconn.PgError
	var netErr net.Error
	return errors.As(err, &pgErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, pgx.ErrTxClosed)
}

// dbFailure classifies a database error: OB301 is the non-retryable receipt_conflict, an
// envelope the database refuses is envelope_invalid; a receipt it refuses (OB002: the kit's
// configuration disagrees with the consumer database's destination registry) is retryable
// consumer_unavailable, fixable by an operator; everything else (connection loss, timeouts,
// serialization, privileges) is the retryable database_unavailable.
func (c *Consumer) dbFailure(ctx context.Context, step string, err error) wire.Result {
	switch {
	case errors.Is(err, pgcall.ErrReceiptConflict):
		return nonRetryable(CodeReceiptConflict, "event_id_reused")
	case errors.Is(err, pgcall.ErrEnvelopeInvalid), errors.Is(err, pgcall.ErrNotCanonicalizable):
		return nonRetryable(CodeEnvelopeInvalid, "database_check")
	case errors.Is(err, pgcall.ErrAckRejected):
		c.log.Error("receipt refused by the database", "step", step, "err", err)
		return retryable(CodeConsumerUnavailable, "receipt_refused")
	}
	if ctx.Err() != nil && !isDBError(err) {
		return retryable(CodeConsumerTimeout, step)
	}
	c.log.Warn("database failure", "step", step, "sqlstate", pgcall.SQLState(err), "err", err)
	return retryable(CodeDatabaseUnavailable, pgcall.SQLState(err))
}
