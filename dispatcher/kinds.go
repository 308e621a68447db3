package dispatcher

// The kinds of outcome the dispatcher records, in one table (SPEC R-AK-9, issue 39 item 2):
// each kind names its kernel functions (the grouped call and the one-row call), the item it
// carries and the operation label of its metrics and logs, and says what a recorded or refused
// outcome does next. The grouping machinery (outcomes.go) is the same for every kind. Adding a
// kind is a row here plus its SQL functions and pgcall wrappers; the error codes an outcome may
// carry are the database's (outbox.error_code_catalog, loaded by Preflight), never a Go list.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// outcomeItem is one delivery's outcome, whatever its kind: the fence and the fields its kind
// uses.
type outcomeItem struct {
	fence            pgcall.Fence
	ack, receipt     json.RawMessage // ack
	receiptCandidate string          // ack: the receipt's digest candidate (D-2 hot path)
	code             string          // retry, quarantine: the normalized error code
	reason           string          // quarantine
	ref              *string         // retry, quarantine: the sanitized error reference
}

// outcomeKind is one row of the table.
type outcomeKind struct {
	// op labels the kind's metrics (outcome_batch_size, fencing_rejections, database_errors)
	// and log lines.
	op string
	// function is the kernel function of the grouped call (logs).
	function string
	// group records two or more items with one call (ack_deliveries, …): one row per item, in
	// order.
	group func(ctx context.Context, db pgcall.DBTX, items []outcomeItem) ([]pgcall.ItemOutcome, error)
	// one records one item with the one-row call (ack_delivery, …).
	one func(ctx context.Context, db pgcall.DBTX, it outcomeItem) (string, error)
	// groupable reports whether an item can travel in a group (nil: always).
	groupable func(it outcomeItem) bool
	// hookInGroup, when set, is the hook point hit inside a group call's transaction before its
	// commit (the group call then runs in an explicit transaction, with a hook only).
	hookInGroup string
	// recorded runs after the kernel recorded the item (outcome is its answer).
	recorded func(d *Dispatcher, j *job, it outcomeItem, outcome string)
	// refused, when set, handles the kernel refusing the item's documents (isDocumentRejection)
	// and returns the retry that replaces the outcome (code "": none).
	refused func(d *Dispatcher, j *job, it outcomeItem, err error) (retryCode, retryRef string)
	// unrecorded, when set, runs when the item was not recorded (fenced off, or an error).
	unrecorded func(d *Dispatcher, j *job)
}

// The kinds, indexing outcomeKinds and the dispatcher's batchers.
const (
	kindAck = iota
	kindRetry
	kindQuarantine
	numKinds
)

var outcomeKinds = [numKinds]outcomeKind{
	kindAck: {
		op:       "ack",
		function: "ack_deliveries",
		group: func(ctx context.Context, db pgcall.DBTX, items []outcomeItem) ([]pgcall.ItemOutcome, error) {
			in := make([]pgcall.AckItem, len(items))
			for i, it := range items {
				in[i] = pgcall.AckItem{Fence: it.fence, Ack: it.ack, Receipt: it.receipt, ReceiptDigestCandidate: it.receiptCandidate}
			}
			return pgcall.AckDeliveries(ctx, db, in)
		},
		one: func(ctx context.Context, db pgcall.DBTX, it outcomeItem) (string, error) {
			return pgcall.AckDelivery(ctx, db, it.fence, it.ack, it.receipt, it.receiptCandidate)
		},
		groupable:   batchable,
		hookInGroup: HookDuringBatchAck,
		recorded: func(d *Dispatcher, j *job, _ outcomeItem, outcome string) {
			d.observe(j, "acknowledged")
			d.hook(HookAfterAck) // T-3: ack committed
			d.m.Acks.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, outcome).Inc()
			j.log.Debug("acknowledged", "publication", outcome)
		},
		refused: func(d *Dispatcher, j *job, _ outcomeItem, err error) (string, string) {
			// The consumer answered something the kernel refuses (OB002, OB201, malformed JSON):
			// never acknowledged; retried as invalid_ack. Not a transport error: the consumer
			// answered; the kernel refused what it said.
			d.observe(j, "ack_rejected")
			d.m.AckRejections.WithLabelValues(j.r.Destination, pgcall.SQLState(err)).Inc()
			j.log.Warn("ack rejected by the kernel; retrying as invalid_ack", "sqlstate", pgcall.SQLState(err))
			return transport.CodeInvalidAck, "ack_rejected:" + pgcall.SQLState(err)
		},
		unrecorded: func(d *Dispatcher, j *job) { d.observe(j, "ack_unrecorded") },
	},
	kindRetry: {
		op:       "retry",
		function: "retry_deliveries",
		group: func(ctx context.Context, db pgcall.DBTX, items []outcomeItem) ([]pgcall.ItemOutcome, error) {
			in := make([]pgcall.RetryItem, len(items))
			for i, it := range items {
				in[i] = pgcall.RetryItem{Fence: it.fence, ErrorCode: it.code, ErrorRef: it.ref}
			}
			return pgcall.RetryDeliveries(ctx, db, in)
		},
		one: func(ctx context.Context, db pgcall.DBTX, it outcomeItem) (string, error) {
			return pgcall.RetryDelivery(ctx, db, it.fence, it.code, it.ref)
		},
		recorded: func(d *Dispatcher, j *job, it outcomeItem, state string) {
			d.m.Retries.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, it.code, state).Inc()
			if state == "quarantined" {
				d.m.Quarantines.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, "retry_exhausted").Inc()
				j.log.Warn("retries exhausted; quarantined", "error_code", it.code)
			} else {
				j.log.Debug("retry scheduled", "error_code", it.code)
			}
		},
	},
	kindQuarantine: {
		op:       "quarantine",
		function: "quarantine_deliveries",
		group: func(ctx context.Context, db pgcall.DBTX, items []outcomeItem) ([]pgcall.ItemOutcome, error) {
			in := make([]pgcall.QuarantineItem, len(items))
			for i, it := range items {
				in[i] = pgcall.QuarantineItem{Fence: it.fence, Reason: it.reason, ErrorCode: it.code, ErrorRef: it.ref}
			}
			return pgcall.QuarantineDeliveries(ctx, db, in)
		},
		one: func(ctx context.Context, db pgcall.DBTX, it outcomeItem) (string, error) {
			return "quarantined", pgcall.QuarantineDelivery(ctx, db, it.fence, it.reason, it.code, it.ref)
		},
		recorded: func(d *Dispatcher, j *job, it outcomeItem, _ string) {
			d.m.Quarantines.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, it.reason).Inc()
			j.log.Warn("quarantined", "error_code", it.code)
		},
	},
}

// finish records j's outcome of kind k and acts on the kernel's answer: the kind's recorded,
// refused (then the retry it names) or unrecorded step; a fencing rejection drops the outcome (someone else owns the
// delivery now); any other failure leaves the delivery to lease expiry.
func (d *Dispatcher) finish(j *job, k int, it outcomeItem) {
	kind := &outcomeKinds[k]
	outcome, err := d.record(j, k, it)
	switch {
	case err == nil:
		kind.recorded(d, j, it, outcome)
		return
	case kind.refused != nil && !errors.Is(err, pgcall.ErrFencingRejected) && isDocumentRejection(err):
		if code, ref := kind.refused(d, j, it, err); code != "" {
			d.finish(j, kindRetry, outcomeItem{fence: j.fence, code: code, ref: refPtr(ref)})
		}
		return
	}
	if kind.unrecorded != nil {
		kind.unrecorded(d, j)
	}
	if errors.Is(err, pgcall.ErrFencingRejected) {
		d.fenced(j, kind.op)
		return
	}
	j.log.Error(kind.op+" not recorded; left to lease expiry", "error_code", it.code, "error", safeErr(err), "sqlstate", pgcall.SQLState(err))
}

// ack records a consumer's acknowledgement. D-2 receipt hot path: the receipt's digest
// candidate, canonicalized here, spares the database its PL/pgSQL canonicalization (it still
// checks the candidate against the receipt and falls back to canonicalizing itself when it is
// not exactly that).
func (d *Dispatcher) ack(j *job, res wire.Result) {
	it := outcomeItem{fence: j.fence, ack: res.Ack, receipt: res.Receipt}
	if _, cand, err := d.receipts.Load().DigestCandidate(res.Receipt); err == nil {
		it.receiptCandidate = string(cand)
	}
	d.finish(j, kindAck, it)
}

// retry records a retryable failure with its normalized code and the consumer's ref.
func (d *Dispatcher) retry(j *job, code, ref string) {
	d.finish(j, kindRetry, outcomeItem{fence: j.fence, code: code, ref: refPtr(ref)})
}

// quarantineRef quarantines with reason = error_code = code and keeps the consumer's ref
// (sanitized; dropped whole when it breaks the ref rule) on the finish (R-AK-6, R-AK-7).
func (d *Dispatcher) quarantineRef(j *job, code, ref string) {
	d.finish(j, kindQuarantine, outcomeItem{fence: j.fence, code: code, reason: code, ref: refPtr(ref)})
}

// refPtr is the sanitized ref for an outcome call, nil when none survives (dropped whole when it
// breaks the ref rule).
func refPtr(ref string) *string {
	if ref = transport.SanitizeRef(ref); ref != "" {
		return &ref
	}
	return nil
}

// observe records the consumer call's duration under the outcome that counts (R-DP-4): for a
// 200 answer the kernel's verdict on the ack, otherwise the answer's class.
func (d *Dispatcher) observe(j *job, outcome string) {
	d.m.DeliveryLatency.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, outcome).Observe(j.elapsed.Seconds())
}

// batchable reports whether an ack item's documents can travel inside a group document: JSON,
// and without \u0000 (which PostgreSQL cannot store as jsonb: the whole call would fail with
// OB201). A receipt with a candidate was canonicalized by internal/canon, which refuses both.
// Documents a group could not carry are recorded alone, where the kernel refuses them as before.
func batchable(it outcomeItem) bool {
	return it.receiptCandidate != "" && json.Valid(it.ack) && !bytes.Contains(it.ack, []byte(`\u0000`))
}

func (d *Dispatcher) fenced(j *job, op string) {
	d.m.FencingRejections.WithLabelValues(j.r.Destination, op).Inc()
	j.log.Warn("outcome fenced off: the lease is no longer ours; dropped", "operation", op)
}
