// Package scenario is the reference business scenario shared by the demo, the end-to-end and
// crash tests and the soak: per run, the 13 reference event types with wallet-first reservations
// (odd runs), out-of-order revisions (every fifth run appends billing revision 3 before 2) and,
// on request, one event the operations projector rejects.
package scenario

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/producer"
)

// Beginner starts business transactions (a *pgx.Conn or *pgxpool.Pool).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// EventsPerRun and DeliveriesPerRun describe one run.
const (
	EventsPerRun     = 13
	DeliveriesPerRun = 14
)

// Committed is told the event ids of every committed business transaction.
type Committed func(ids []string)

// Producer appends runs whose identifiers (aggregates, operations, correlations) are unique
// per Prefix, so concurrent producers with different prefixes never share an aggregate.
type Producer struct {
	Conn      Beginner
	Prefix    string
	Workspace string
	Committed Committed // optional
}

func (p Producer) tenant() producer.Tenant {
	ws := p.Workspace
	if ws == "" {
		ws = "ws-" + p.Prefix
	}
	return producer.Tenant{TenantKind: "organization", TenantID: "acme", WorkspaceID: ws}
}

func (p Producer) event(r int, typ, schema, agg string, rev int64, payload string) producer.Event {
	return producer.Event{EventType: typ, EventSchemaVersion: schema, AggregateID: agg, AggregateRevision: rev,
		Tenant: p.tenant(), CorrelationID: fmt.Sprintf("corr-%s-%d", p.Prefix, r), OperationID: fmt.Sprintf("op-%s-%d", p.Prefix, r),
		CausationID: fmt.Sprintf("cause-%s-%d", p.Prefix, r), Payload: json.RawMessage(payload)}
}

// appendTx appends events in one business transaction through the producer library.
func (p Producer) appendTx(ctx context.Context, events ...producer.Event) error {
	tx, err := p.Conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	ids := make([]string, 0, len(events))
	for _, e := range events {
		res, err := producer.Append(ctx, tx, e)
		if err != nil {
			return fmt.Errorf("append %s: %w", e.EventType, err)
		}
		ids = append(ids, res.EventID)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if p.Committed != nil {
		p.Committed(ids)
	}
	return nil
}

// Runs appends the runs [from, to), one business transaction per step (the last step appends
// four events in one transaction).
func (p Producer) Runs(ctx context.Context, from, to int) error {
	for r := from; r < to; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		run := fmt.Sprintf("run-%s-%d", p.Prefix, r)
		created := p.event(r, "run.created@2.0", "2.0", run, 1, fmt.Sprintf(`{"runId":%q,"model":"m-large","maxCost":"25.00"}`, run))
		wallet := p.event(r, "wallet.reserved@2.0", "2.0", "wallet-"+run, 1, fmt.Sprintf(`{"runId":%q,"reservationId":"res-%s-%d","amount":"25.00","currency":"EUR"}`, run, p.Prefix, r))
		// The run event causes the reservation (R-AP-7, R-OP-1: wallet v2 causationId is the run
		// event's id); the projector links them only on that causation and the same tenant.
		created.EventID = newUUID()
		wallet.CausationID = created.EventID
		if r%2 == 1 { // wallet first: the projector must wait for the run, never invent an operation
			if err := p.appendTx(ctx, wallet); err != nil {
				return err
			}
			if err := p.appendTx(ctx, created); err != nil {
				return err
			}
		} else if err := p.appendTx(ctx, created, wallet); err != nil {
			return err
		}
		billing := "billing-" + run
		b1 := p.event(r, "billing.finalization.committed@1", "1", billing, 1, `{"invoiceTotal":"19.80"}`)
		b2 := p.event(r, "billing.settlement-transition.committed@1", "1", billing, 2, `{"from":"open","to":"settling"}`)
		b3 := p.event(r, "billing.finalization-reconciliation.case-requested@1", "1", billing, 3, `{"caseId":"rc-1"}`)
		b4 := p.event(r, "billing.finalization-reconciliation-resolution.applied@1", "1", billing, 4, `{"caseId":"rc-1","resolution":"accepted"}`)
		order := []producer.Event{b1, b2, b3, b4}
		if r%5 == 0 { // out of order: revision 3 reaches the projector before 2 (a gap, retried)
			order = []producer.Event{b1, b3, b2, b4}
		}
		for _, e := range order {
			if err := p.appendTx(ctx, e); err != nil {
				return err
			}
		}
		caseAgg := "case-" + run
		for i, typ := range []string{"billing.late-settlement-exposure.case-requested@1", "billing.case-resolution.applied@1",
			"billing.late-settlement-command-result.committed@1"} {
			if err := p.appendTx(ctx, p.event(r, typ, "1", caseAgg, int64(i+1), `{"exposure":"3.10"}`)); err != nil {
				return err
			}
		}
		if err := p.appendTx(ctx,
			p.event(r, "execution.attempt-eligibility.finalized@1", "1", "exec-"+run, 1, `{"attempt":1,"eligible":true}`),
			p.event(r, "gateway.evidence-availability.current-changed@1", "1", "exec-"+run, 2, `{"evidence":"available"}`),
			p.event(r, "execution.run-finalization.closed@1", "1", "runfin-"+run, 1, `{"closedBy":"scheduler"}`),
			p.event(r, "metering.settlement-input.current-changed@1", "1", "settle-"+run, 1, `{"units":"1200"}`),
		); err != nil {
			return err
		}
	}
	return nil
}

// Rejected appends the one event the operations projector must reject: a second
// run.created@2.0 for operation r of this producer (which run r already created), on another
// aggregate. It ends quarantined as consumer_rejected and is never published.
func (p Producer) Rejected(ctx context.Context, r int) error {
	return p.appendTx(ctx, p.event(r, "run.created@2.0", "2.0", "run-duplicate-"+p.Prefix, 1, `{"runId":"run-duplicate"}`))
}

// Produce appends runs runs and then the rejected event, with prefix "demo", and returns the
// number of events appended (runs × EventsPerRun + 1).
func Produce(ctx context.Context, conn Beginner, runs int) (int, error) {
	count := 0
	p := Producer{Conn: conn, Prefix: "demo", Committed: func(ids []string) { count += len(ids) }}
	if err := p.Runs(ctx, 1, runs+1); err != nil {
		return count, err
	}
	if err := p.Rejected(ctx, 1); err != nil {
		return count, err
	}
	return count, nil
}

// newUUID returns a random (version 4) UUID, lower-case.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
