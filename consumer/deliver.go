package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
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
	if c.cfg.Mutate != nil {
		return c.answer(d, c.handleOneTrip(ctx, ev)), nil
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
	attrs := append([]any{"event_id", d.EventID, "attempt_id", d.AttemptID, "status", r.Status.String()}, traceLogAttrs(d)...)
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
	if d.RequiredProjectionName != "" && d.RequiredProjectionName != c.cfg.ProjectionName {
		return Event{}, nonRetryable(CodeUnsupportedSchema, "projection_target"), false
	}
	if d.RequiredProjectionName != "" && d.RequiredProjectionVersion != c.cfg.ProjectionVersion &&
		(c.cfg.DualApply == nil || d.RequiredProjectionVersion != c.cfg.DualApply.ProjectionVersion) {
		// Another version of this projection (R-PV-2, R-PV-3): during a cutover or a rollback
		// window a delivery may target the version this instance does not serve yet (or any
		// more); the kernel's delivery row is right, this instance is not the one to apply it.
		// Retry (another instance, or this one reconfigured, serves it); never quarantine.
		return Event{}, retryable(CodeConsumerUnavailable, "projection_version_not_served"), false
	}
	if d.EnvelopeDigestAlgorithmVersion != "" && d.EnvelopeDigestAlgorithmVersion != canon.Algorithm {
		return Event{}, nonRetryable(CodeUnsupportedSchema, "digest_algorithm"), false
	}
	if d.EnvelopeSHA256 == "" {
		return Event{}, nonRetryable(CodeEnvelopeInvalid, "missing_digest"), false
	}
	// R-CO-1 / D-2: the kit computes the digest itself; it never trusts the claimed one. Hot
	// path (issue 36): the dispatcher sends the envelope's canonical bytes, whose canonical form
	// the producer's database verified when the event was appended; when sha256 of the bytes is
	// the claimed digest, the bytes are those canonical bytes and nothing is canonicalized
	// again. Otherwise (a sender that does not send canonical bytes, or a wrong digest) the
	// envelope is canonicalized and its jcs-sha256-v1 compared, as before.
	// The bytes are still scanned against the jcs-sha256-v1 subset (canon.Validate: no
	// canonicalization), so a body outside it is envelope_invalid here, as before, whatever digest
	// its sender claims.
	canonical, sha := d.Envelope, canon.SumHex(d.Envelope)
	if sha == d.EnvelopeSHA256 {
		if canon.Validate(d.Envelope) != nil {
			return Event{}, nonRetryable(CodeEnvelopeInvalid, "not_canonicalizable"), false
		}
	} else {
		var err error
		if canonical, sha, err = canon.CanonicalizeDigest(d.Envelope); err != nil {
			return Event{}, nonRetryable(CodeEnvelopeInvalid, "not_canonicalizable"), false
		}
		if sha != d.EnvelopeSHA256 {
			return Event{}, nonRetryable(CodeDigestConflict, "envelope_sha256"), false
		}
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

// parseEnvelope decodes EventEnvelope@1 strictly (D-3): exactly its member names, no null
// member (absent optional fields are omitted), the required ones present and well-formed. One
// pass over the document (issue 36 item 2: the kit's CPU per delivery); the members are decoded
// from their raw values, strings without escapes by slicing.
func parseEnvelope(canonical []byte) (Event, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &top); err != nil {
		return Event{}, err
	}
	var e Event
	var have struct{ id, typ, schema, agg, rev, tenant, at bool }
	for k, v := range top {
		if string(v) == "null" {
			return Event{}, errors.New("null envelope field")
		}
		var err error
		switch k {
		case "eventId":
			e.EventID, err = jsonString(v)
			have.id = true
		case "eventType":
			e.EventType, err = jsonString(v)
			have.typ = true
		case "eventSchemaVersion":
			e.EventSchemaVersion, err = jsonString(v)
			have.schema = true
		case "aggregateId":
			e.AggregateID, err = jsonString(v)
			have.agg = true
		case "aggregateRevision":
			e.AggregateRevision, err = strconv.ParseInt(string(v), 10, 64)
			have.rev = true
		case "tenant":
			e.Tenant, err = parseTenant(v)
			have.tenant = true
		case "correlationId":
			e.CorrelationID, err = jsonString(v)
		case "causationId":
			e.CausationID, err = jsonString(v)
		case "operationId":
			e.OperationID, err = jsonString(v)
		case "occurredAt":
			var at string
			if at, err = jsonString(v); err == nil {
				if e.OccurredAt, err = time.Parse(receipt.TimeLayout, at); err != nil {
					err = fmt.Errorf("occurredAt: %w", err)
				}
			}
			have.at = true
		case "payload":
			e.Payload = v
		default:
			return Event{}, fmt.Errorf("unknown envelope field %q", k)
		}
		if err != nil {
			return Event{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	if !have.id || !uuidRE.MatchString(e.EventID) || !have.typ || e.EventType == "" || !have.schema ||
		e.EventSchemaVersion == "" || !have.agg || e.AggregateID == "" || !have.rev || e.AggregateRevision <= 0 ||
		!have.tenant || e.Tenant.TenantKind == "" || e.Tenant.TenantID == "" || e.Tenant.WorkspaceID == "" ||
		!have.at || len(e.Payload) == 0 {
		return Event{}, errors.New("missing or invalid envelope field")
	}
	return e, nil
}

// parseTenant decodes the tenant object: exactly its member names, strings, no null member.
func parseTenant(raw json.RawMessage) (Tenant, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Tenant{}, err
	}
	var t Tenant
	for k, v := range m {
		if string(v) == "null" {
			return Tenant{}, errors.New("null tenant field")
		}
		var err error
		switch k {
		case "tenantKind":
			t.TenantKind, err = jsonString(v)
		case "tenantId":
			t.TenantID, err = jsonString(v)
		case "workspaceId":
			t.WorkspaceID, err = jsonString(v)
		case "projectId":
			t.ProjectID, err = jsonString(v)
		default:
			return Tenant{}, fmt.Errorf("unknown tenant field %q", k)
		}
		if err != nil {
			return Tenant{}, fmt.Errorf("tenant.%s: %w", k, err)
		}
	}
	return t, nil
}

// jsonString decodes a JSON string value (raw is valid JSON: it comes from json.Unmarshal); one
// without escapes is its bytes between the quotes.
func jsonString(raw json.RawMessage) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", errors.New("not a string")
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
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

func (c *Consumer) readParamsV(ev Event, version int) pgcall.ReadReceiptParams {
	return pgcall.ReadReceiptParams{ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: version, EventID: ev.EventID, EnvelopeSHA256: ev.EnvelopeSHA256}
}

// target is one projection version a delivery is applied to: its version, its Apply and the
// build token a shadow version needs ("" otherwise).
type target struct {
	version int
	apply   ApplyFunc
	token   string
}

// targets are the version the delivery's receipt acknowledges (the one its frozen member names)
// and, with Config.DualApply, the other version kept current in the same transaction.
func (c *Consumer) targets(ev Event) (target, *target) {
	own := target{version: c.cfg.ProjectionVersion, apply: c.cfg.Apply, token: c.cfg.BuildToken}
	d := c.cfg.DualApply
	if d == nil {
		return own, nil
	}
	other := target{version: d.ProjectionVersion, apply: d.Apply, token: d.BuildToken}
	if ev.Delivery.RequiredProjectionVersion == d.ProjectionVersion {
		return other, &own
	}
	return own, &other
}

// handle is step 2 of the package doc: one transaction.
func (c *Consumer) handle(ctx context.Context, ev Event) wire.Result {
	p, dual := c.targets(ev)
	tx, err := c.begin(ctx)
	if err != nil {
		return c.dbFailure(ctx, "begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after Commit

	doc, err := pgcall.ReadReceipt(ctx, tx, c.readParamsV(ev, p.version))
	if err != nil {
		return c.dbFailure(ctx, "read receipt", err)
	}
	if doc != nil {
		return c.acknowledged(doc) // R-CO-1: redelivery → the first receipt, nothing applied
	}

	if c.cfg.Ordered {
		outcome, err := pgcall.ObserveRevision(ctx, tx, pgcall.ObserveRevisionParams{
			ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
			ProjectionVersion: p.version, AggregateID: ev.AggregateID,
			AggregateRevision: ev.AggregateRevision, BuildToken: p.token})
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
			doc, err := pgcall.ReadReceipt(ctx, tx, c.readParamsV(ev, p.version))
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

	if dual != nil { // R-PV-2 (b): the other version, same transaction, its own receipt
		if r, ok := c.applyDual(ctx, tx, ev, *dual); !ok {
			return r
		}
	}
	fields, err := p.apply(ctx, tx, ev)
	if err != nil {
		return c.applyFailure(ctx, err)
	}
	built, err := c.buildReceipt(ev, fields, p.version)
	if err != nil {
		return retryable(CodeConsumerUnavailable, "receipt_fields")
	}
	// D-2 hot path: the canonical envelope bytes, the canonical receipt and the canonical text of
	// its digest candidate, so that the database verifies (sha256, cheap text checks) instead of
	// canonicalizing in PL/pgSQL; same transaction as Apply (R-CO-2).
	rec, err := pgcall.RecordReceipt(ctx, tx, pgcall.RecordReceiptParams{
		ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: p.version, EventEnvelope: ev.Canonical, Receipt: built.Receipt,
		DigestCandidate: built.Candidate, BuildToken: p.token})
	if err != nil {
		return c.dbFailure(ctx, "record receipt", err)
	}
	if rec.Outcome == pgcall.ReceiptExisting {
		// A concurrent delivery won: discard this transaction's mutation, answer with its receipt.
		_ = tx.Rollback(ctx)
		return c.readExisting(ctx, ev, p.version)
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

// applyDual applies ev to the dual version inside tx, before the delivery's own version:
// nothing when that version holds a receipt of the event already (or its revision was applied);
// a revision gap there is kept out of the transaction's outcome (logged; the cutover's readiness
// proof counts the missing receipt, so a switch cannot hide it); any other failure fails the
// whole delivery (retried), so the two versions never diverge silently.
func (c *Consumer) applyDual(ctx context.Context, tx pgx.Tx, ev Event, t target) (wire.Result, bool) {
	doc, err := pgcall.ReadReceipt(ctx, tx, c.readParamsV(ev, t.version))
	if err != nil {
		return c.dbFailure(ctx, "read dual receipt", err), false
	}
	if doc != nil {
		return wire.Result{}, true
	}
	if c.cfg.Ordered {
		outcome, err := pgcall.ObserveRevision(ctx, tx, pgcall.ObserveRevisionParams{
			ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
			ProjectionVersion: t.version, AggregateID: ev.AggregateID,
			AggregateRevision: ev.AggregateRevision, BuildToken: t.token})
		if err != nil {
			return c.dbFailure(ctx, "observe dual revision", err), false
		}
		if outcome != pgcall.RevisionApply {
			c.log.Warn("dual apply skipped", "event_id", ev.EventID, "projection_version", t.version, "revision", outcome)
			return wire.Result{}, true
		}
	}
	fields, err := t.apply(ctx, tx, ev)
	if err != nil {
		return c.applyFailure(ctx, err), false
	}
	built, err := c.buildReceipt(ev, fields, t.version)
	if err != nil {
		return retryable(CodeConsumerUnavailable, "receipt_fields"), false
	}
	rec, err := pgcall.RecordReceipt(ctx, tx, pgcall.RecordReceiptParams{
		ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: t.version, EventEnvelope: ev.Canonical, Receipt: built.Receipt,
		DigestCandidate: built.Candidate, BuildToken: t.token})
	if err != nil {
		return c.dbFailure(ctx, "record dual receipt", err), false
	}
	if rec.Outcome == pgcall.ReceiptExisting { // a concurrent delivery applied it: retry this one
		return retryable(CodeConsumerUnavailable, "dual_receipt_race"), false
	}
	return wire.Result{}, true
}

// handleOneTrip is step 2 for a Mutate consumer: one pipelined chain in one implicit
// transaction (R-CO-2) — [set_config('role') when Role is set,] inbox.accept_delivery (existing
// receipt read, revision check, receipt insert-or-compare), the user's statements,
// inbox.confirm_delivery — sent with one Sync: one round trip (pgx prepares a statement it has
// not seen on that connection first, once). A failure anywhere rolls the whole chain back.
func (c *Consumer) handleOneTrip(ctx context.Context, ev Event) wire.Result {
	var q Queue
	fields, err := c.cfg.Mutate(ev, &q)
	if err != nil {
		return c.applyFailure(ctx, err)
	}
	built, err := c.buildReceipt(ev, fields, c.cfg.ProjectionVersion)
	if err != nil {
		return retryable(CodeConsumerUnavailable, "receipt_fields")
	}
	ap := pgcall.AcceptDeliveryParams{ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: c.cfg.ProjectionVersion, EventID: ev.EventID, EnvelopeSHA256: ev.EnvelopeSHA256,
		EventEnvelope: ev.Canonical, Receipt: built.Receipt, DigestCandidate: built.Candidate}
	if c.cfg.Ordered {
		ap.AggregateID, ap.AggregateRevision = ev.AggregateID, ev.AggregateRevision
	}
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, q.Len()+3)}
	if c.cfg.Role != "" {
		// Transaction-local like SET LOCAL ROLE; set_config because the chain is an implicit
		// transaction (no BEGIN: an error then leaves the connection idle, not aborted).
		b.Queue(`SELECT pg_catalog.set_config('role', $1::text, true)`, c.cfg.Role)
	}
	var acc pgcall.AcceptDeliveryResult
	pgcall.QueueAcceptDelivery(b, ap, &acc)
	for _, s := range q.stmts {
		b.Queue(s.sql, s.args...)
	}
	pgcall.QueueConfirmDelivery(b, pgcall.ConfirmDeliveryParams{ConsumerName: c.cfg.ConsumerName,
		ProjectionName: c.cfg.ProjectionName, ProjectionVersion: c.cfg.ProjectionVersion, EventID: ev.EventID})
	err = c.batcher.SendBatch(ctx, b).Close()
	switch acc.Outcome {
	case pgcall.ReceiptNew:
		if err != nil {
			// A statement of the user's (or the commit) failed: nothing is kept.
			return c.applyFailure(ctx, err)
		}
		if acc.Ref != built.Ref || acc.Digest != built.Digest {
			c.log.Error("receipt digest differs between the kit and the database", "event_id", ev.EventID)
			return retryable(CodeConsumerUnavailable, "receipt_digest_drift")
		}
		return wire.Result{Status: wire.Acknowledged, Ack: built.Ack, Receipt: built.Receipt}
	case pgcall.ReceiptExisting:
		if acc.Document == nil {
			return retryable(CodeDatabaseUnavailable, "receipt_not_visible")
		}
		return c.acknowledged(acc.Document) // R-CO-1: redelivery → the first receipt, nothing applied
	case pgcall.AcceptGap:
		return c.recordGap(ctx, ev)
	case pgcall.AcceptDuplicateRevision:
		return nonRetryable(CodeConsumerRejected, "revision_already_applied")
	case "":
		if err == nil {
			return retryable(CodeConsumerUnavailable, "accept_delivery_outcome")
		}
		return c.dbFailure(ctx, "accept delivery", err)
	default:
		return retryable(CodeConsumerUnavailable, "accept_delivery_outcome")
	}
}

// recordGap keeps the gap record of R-CO-3 after the one-round-trip chain rolled back: a
// transaction of its own with observe_revision, committed only if it still says 'gap' (if the
// missing revision arrived meanwhile nothing is kept and the next attempt applies). Either way
// the answer is retryable awaiting_revision, no receipt.
func (c *Consumer) recordGap(ctx context.Context, ev Event) wire.Result {
	tx, err := c.begin(ctx)
	if err != nil {
		return c.dbFailure(ctx, "begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	outcome, err := pgcall.ObserveRevision(ctx, tx, pgcall.ObserveRevisionParams{
		ConsumerName: c.cfg.ConsumerName, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: c.cfg.ProjectionVersion, AggregateID: ev.AggregateID,
		AggregateRevision: ev.AggregateRevision, BuildToken: c.cfg.BuildToken})
	if err != nil {
		return c.dbFailure(ctx, "observe revision", err)
	}
	if outcome == pgcall.RevisionGap {
		if err := tx.Commit(ctx); err != nil {
			return c.dbFailure(ctx, "commit gap", err)
		}
	}
	return retryable(CodeAwaitingRevision, "revision_gap")
}

// buildReceipt builds the kit's receipt of ev for the given projection version (the delivery's
// own, or the dual one); the error is logged here.
func (c *Consumer) buildReceipt(ev Event, fields ReceiptFields, version int) (receipt.Document, error) {
	built, err := c.receipts.Build(c.cfg.ReceiptKind, receipt.Params{
		Destination: c.cfg.Destination, ConsumerName: c.cfg.ConsumerName, EventID: ev.EventID,
		EventEnvelopeSHA256: ev.EnvelopeSHA256, ProjectionName: c.cfg.ProjectionName,
		ProjectionVersion: version, EventType: c.eventTypeField(ev),
		EventSchemaVersion: c.eventSchemaField(ev), Time: c.cfg.Now(), Fields: fields})
	if err != nil {
		// A defect of the handler's fields, fixable by a deploy: retried (and quarantined as
		// retry_exhausted if it persists), never acknowledged.
		c.log.Error("receipt fields rejected", "event_id", ev.EventID, "err", err)
	}
	return built, err
}

// A kind whose members require the event type/schema (a projection receipt in the reference
// release) gets the event's (R-AK-1a); other kinds' receipts do not carry them.
func (c *Consumer) eventTypeField(ev Event) string {
	if c.eventFields {
		return ev.EventType
	}
	return ""
}

func (c *Consumer) eventSchemaField(ev Event) string {
	if c.eventFields {
		return ev.EventSchemaVersion
	}
	return ""
}

func (c *Consumer) readExisting(ctx context.Context, ev Event, version int) wire.Result {
	tx, err := c.begin(ctx)
	if err != nil {
		return c.dbFailure(ctx, "begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	doc, err := pgcall.ReadReceipt(ctx, tx, c.readParamsV(ev, version))
	if err != nil {
		return c.dbFailure(ctx, "read receipt", err)
	}
	if doc == nil {
		return retryable(CodeDatabaseUnavailable, "receipt_not_visible")
	}
	return c.acknowledged(doc)
}

func (c *Consumer) acknowledged(doc []byte) wire.Result {
	d, err := c.receipts.Parse(doc)
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
