// Package scenario is the reference business scenario shared by the demo, the end-to-end tests
// and the soak: per run, the 13 reference event types with wallet-first reservations,
// out-of-order revisions and, once, an event the operations projector rejects.
package scenario

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/producer"
)

// Beginner starts business transactions (a *pgx.Conn or *pgxpool.Pool).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// EventsPerRun and DeliveriesPerRun describe one run; Produce adds one rejected event at the end.
const (
	EventsPerRun     = 13
	DeliveriesPerRun = 14
)

// Produce appends, through the producer library as the connection's role (outbox_producer), runs x 13 events covering the 13 reference pairs, with wallet-first
// reservations (odd runs), out-of-order revisions (every fifth run appends billing revision 3
// before revision 2) and one rejected event (a second run.created for an existing operation).
func Produce(ctx context.Context, conn Beginner, runs int) (int, error) {
	count := 0
	tenant := producer.Tenant{TenantKind: "organization", TenantID: "acme", WorkspaceID: "ws-demo"}
	ev := func(r int, typ, schema, agg string, rev int64, payload string) producer.Event {
		return producer.Event{EventType: typ, EventSchemaVersion: schema, AggregateID: agg, AggregateRevision: rev,
			Tenant: tenant, CorrelationID: fmt.Sprintf("corr-%03d", r), OperationID: fmt.Sprintf("op-%03d", r),
			CausationID: fmt.Sprintf("cause-%03d", r), Payload: json.RawMessage(payload)}
	}
	// appendTx appends events in one business transaction.
	appendTx := func(events ...producer.Event) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		for _, e := range events {
			if _, err := producer.Append(ctx, tx, e); err != nil {
				return fmt.Errorf("append %s: %w", e.EventType, err)
			}
		}
		count += len(events)
		return tx.Commit(ctx)
	}
	for r := 1; r <= runs; r++ {
		run := fmt.Sprintf("run-%03d", r)
		created := ev(r, "run.created@2.0", "2.0", run, 1, fmt.Sprintf(`{"runId":%q,"model":"m-large","maxCost":"25.00"}`, run))
		wallet := ev(r, "wallet.reserved@2.0", "2.0", "wallet-"+run, 1, fmt.Sprintf(`{"runId":%q,"reservationId":"res-%03d","amount":"25.00","currency":"EUR"}`, run, r))
		if r%2 == 1 { // wallet first: the projector must wait for the run, never invent an operation
			if err := appendTx(wallet); err != nil {
				return count, err
			}
			if err := appendTx(created); err != nil {
				return count, err
			}
		} else if err := appendTx(created, wallet); err != nil {
			return count, err
		}
		billing := "billing-" + run
		b1 := ev(r, "billing.finalization.committed@1", "1", billing, 1, `{"invoiceTotal":"19.80"}`)
		b2 := ev(r, "billing.settlement-transition.committed@1", "1", billing, 2, `{"from":"open","to":"settling"}`)
		b3 := ev(r, "billing.finalization-reconciliation.case-requested@1", "1", billing, 3, `{"caseId":"rc-1"}`)
		b4 := ev(r, "billing.finalization-reconciliation-resolution.applied@1", "1", billing, 4, `{"caseId":"rc-1","resolution":"accepted"}`)
		order := []producer.Event{b1, b2, b3, b4}
		if r%5 == 0 { // out of order: revision 3 reaches the projector before 2 (a gap, retried)
			order = []producer.Event{b1, b3, b2, b4}
		}
		for _, e := range order {
			if err := appendTx(e); err != nil {
				return count, err
			}
		}
		caseAgg := "case-" + run
		for i, typ := range []string{"billing.late-settlement-exposure.case-requested@1", "billing.case-resolution.applied@1",
			"billing.late-settlement-command-result.committed@1"} {
			if err := appendTx(ev(r, typ, "1", caseAgg, int64(i+1), `{"exposure":"3.10"}`)); err != nil {
				return count, err
			}
		}
		if err := appendTx(
			ev(r, "execution.attempt-eligibility.finalized@1", "1", "exec-"+run, 1, `{"attempt":1,"eligible":true}`),
			ev(r, "gateway.evidence-availability.current-changed@1", "1", "exec-"+run, 2, `{"evidence":"available"}`),
			ev(r, "execution.run-finalization.closed@1", "1", "runfin-"+run, 1, `{"closedBy":"scheduler"}`),
			ev(r, "metering.settlement-input.current-changed@1", "1", "settle-"+run, 1, `{"units":"1200"}`),
		); err != nil {
			return count, err
		}
	}
	// The rejected event: a second run.created@2.0 for operation op-001 on another aggregate.
	if err := appendTx(ev(1, "run.created@2.0", "2.0", "run-duplicate", 1, `{"runId":"run-duplicate"}`)); err != nil {
		return count, err
	}
	return count, nil
}
