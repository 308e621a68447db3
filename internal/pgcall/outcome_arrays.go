package pgcall

import "context"

// The typed forms of the batch outcome functions (SPEC §12a HP-2): the items go as parallel
// arrays, element i of each array = item i, so the database parses no JSON document for the
// batch. Same rule, same checks and the same ItemOutcome rows, in input order, as the JSON
// forms (AckDeliveries, RetryDeliveries, QuarantineDeliveries), which stay for other callers.

const ackDeliveriesTypedSQL = `SELECT destination, event_id::text, attempt_id::text, outcome, coalesce(sqlstate, ''), coalesce(detail, '')
FROM outbox.ack_deliveries($1::text[], $2::text[]::uuid[], $3::text[]::uuid[], $4::text[]::uuid[], $5::text[]::json[], $6::text[]::json[], $7::text[])`

// AckDeliveriesTyped calls the typed form of outbox.ack_deliveries (text[], uuid[], uuid[],
// uuid[], json[], json[], text[]): many acks in one call and one transaction, each fenced and
// validated like AckDelivery; one ItemOutcome per item in input order (R-AK-9, HP-2). Caller
// role: outbox_dispatcher.
func AckDeliveriesTyped(ctx context.Context, db DBTX, items []AckItem) ([]ItemOutcome, error) {
	f := fenceArrays(len(items))
	acks := make([]string, len(items))
	receipts := make([]string, len(items))
	cands := make([]*string, len(items))
	for i, it := range items {
		f.add(i, it.Fence)
		acks[i] = string(rawOrNull(it.Ack))
		receipts[i] = string(rawOrNull(it.Receipt))
		if it.ReceiptDigestCandidate != "" {
			c := it.ReceiptDigestCandidate
			cands[i] = &c
		}
	}
	return outcomeRows(ctx, db, "ack deliveries", ackDeliveriesTypedSQL,
		f.dest, f.event, f.attempt, f.token, acks, receipts, cands)
}

const retryDeliveriesTypedSQL = `SELECT destination, event_id::text, attempt_id::text, outcome, coalesce(sqlstate, ''), coalesce(detail, '')
FROM outbox.retry_deliveries($1::text[], $2::text[]::uuid[], $3::text[]::uuid[], $4::text[]::uuid[], $5::text[], $6::text[])`

// RetryDeliveriesTyped calls the typed form of outbox.retry_deliveries (text[], uuid[], uuid[],
// uuid[], text[], text[]): many retryable outcomes in one transaction, each like RetryDelivery
// (R-AK-5, R-AK-9, HP-2). Caller role: outbox_dispatcher.
func RetryDeliveriesTyped(ctx context.Context, db DBTX, items []RetryItem) ([]ItemOutcome, error) {
	f := fenceArrays(len(items))
	codes := make([]string, len(items))
	refs := make([]*string, len(items))
	for i, it := range items {
		f.add(i, it.Fence)
		codes[i] = it.ErrorCode
		refs[i] = it.ErrorRef
	}
	return outcomeRows(ctx, db, "retry deliveries", retryDeliveriesTypedSQL,
		f.dest, f.event, f.attempt, f.token, codes, refs)
}

const quarantineDeliveriesTypedSQL = `SELECT destination, event_id::text, attempt_id::text, outcome, coalesce(sqlstate, ''), coalesce(detail, '')
FROM outbox.quarantine_deliveries($1::text[], $2::text[]::uuid[], $3::text[]::uuid[], $4::text[]::uuid[], $5::text[], $6::text[], $7::text[])`

// QuarantineDeliveriesTyped calls the typed form of outbox.quarantine_deliveries (text[],
// uuid[], uuid[], uuid[], text[], text[], text[]): many non-retryable outcomes in one
// transaction, each like QuarantineDelivery (R-AK-6, R-AK-9, HP-2). Caller role:
// outbox_dispatcher.
func QuarantineDeliveriesTyped(ctx context.Context, db DBTX, items []QuarantineItem) ([]ItemOutcome, error) {
	f := fenceArrays(len(items))
	reasons := make([]string, len(items))
	codes := make([]string, len(items))
	refs := make([]*string, len(items))
	for i, it := range items {
		f.add(i, it.Fence)
		reasons[i] = it.Reason
		codes[i] = it.ErrorCode
		refs[i] = it.ErrorRef
	}
	return outcomeRows(ctx, db, "quarantine deliveries", quarantineDeliveriesTypedSQL,
		f.dest, f.event, f.attempt, f.token, reasons, codes, refs)
}

// fences holds the four fence arrays of a typed batch; an empty id goes as NULL (the fencing
// rule answers it, OB001, as for a missing member in the JSON form).
type fences struct {
	dest                  []string
	event, attempt, token []*string
}

func fenceArrays(n int) fences {
	return fences{dest: make([]string, n), event: make([]*string, n), attempt: make([]*string, n), token: make([]*string, n)}
}

func (f fences) add(i int, fe Fence) {
	f.dest[i] = fe.Destination
	f.event[i], f.attempt[i], f.token[i] = nonEmpty(fe.EventID), nonEmpty(fe.AttemptID), nonEmpty(fe.LeaseToken)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
