package soak

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/scenario"
	"github.com/oceanway/pgoutbox/producer"
)

// EventsPerRun is the size of one business run of the soak's scenario: the 13 reference event
// types, exactly as internal/scenario (wallet-first reservations on odd runs, billing revision
// 3 before 2 on every fifth run), with identifiers made unique per producer so that concurrent
// producers never share an aggregate, an operation or a correlation.
const EventsPerRun = scenario.EventsPerRun

// DeliveriesPerRun is the number of mandatory deliveries one run creates.
const DeliveriesPerRun = scenario.DeliveriesPerRun

// appended is called once per committed business transaction with the event ids it appended.
type appended func(ids []string)

// produceRuns appends the runs [from, to) of producer prefix through producer.Append, one
// business transaction per step (several events in one transaction for the last step, like
// the reference scenario). Only committed events are reported.
func produceRuns(ctx context.Context, conn *pgx.Conn, prefix string, from, to int, done appended) error {
	tenant := producer.Tenant{TenantKind: "organization", TenantID: "acme", WorkspaceID: "ws-soak"}
	ev := func(r int, typ, schema, agg string, rev int64, payload string) producer.Event {
		return producer.Event{EventType: typ, EventSchemaVersion: schema, AggregateID: agg, AggregateRevision: rev,
			Tenant: tenant, CorrelationID: fmt.Sprintf("corr-%s-%d", prefix, r), OperationID: opID(prefix, r),
			CausationID: fmt.Sprintf("cause-%s-%d", prefix, r), Payload: json.RawMessage(payload)}
	}
	appendTx := func(events ...producer.Event) error {
		tx, err := conn.Begin(ctx)
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
		done(ids)
		return nil
	}
	for r := from; r < to; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		run := fmt.Sprintf("run-%s-%d", prefix, r)
		created := ev(r, "run.created@2.0", "2.0", run, 1, fmt.Sprintf(`{"runId":%q,"model":"m-large","maxCost":"25.00"}`, run))
		wallet := ev(r, "wallet.reserved@2.0", "2.0", "wallet-"+run, 1, fmt.Sprintf(`{"runId":%q,"reservationId":"res-%s-%d","amount":"25.00","currency":"EUR"}`, run, prefix, r))
		if r%2 == 1 { // wallet first: the projector must wait for the run, never invent an operation
			if err := appendTx(wallet); err != nil {
				return err
			}
			if err := appendTx(created); err != nil {
				return err
			}
		} else if err := appendTx(created, wallet); err != nil {
			return err
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
				return err
			}
		}
		caseAgg := "case-" + run
		for i, typ := range []string{"billing.late-settlement-exposure.case-requested@1", "billing.case-resolution.applied@1",
			"billing.late-settlement-command-result.committed@1"} {
			if err := appendTx(ev(r, typ, "1", caseAgg, int64(i+1), `{"exposure":"3.10"}`)); err != nil {
				return err
			}
		}
		if err := appendTx(
			ev(r, "execution.attempt-eligibility.finalized@1", "1", "exec-"+run, 1, `{"attempt":1,"eligible":true}`),
			ev(r, "gateway.evidence-availability.current-changed@1", "1", "exec-"+run, 2, `{"evidence":"available"}`),
			ev(r, "execution.run-finalization.closed@1", "1", "runfin-"+run, 1, `{"closedBy":"scheduler"}`),
			ev(r, "metering.settlement-input.current-changed@1", "1", "settle-"+run, 1, `{"units":"1200"}`),
		); err != nil {
			return err
		}
	}
	return nil
}

func opID(prefix string, r int) string { return fmt.Sprintf("op-%s-%d", prefix, r) }

// produceRejected appends the one event the operations projector must reject (a second
// run.created@2.0 for an operation that already has one, on another aggregate): it ends
// quarantined as consumer_rejected, never acknowledged, and its event is never published.
func produceRejected(ctx context.Context, conn *pgx.Conn, prefix string, r int, done appended) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	res, err := producer.Append(ctx, tx, producer.Event{EventType: "run.created@2.0", EventSchemaVersion: "2.0",
		AggregateID: "run-duplicate-" + prefix, AggregateRevision: 1,
		Tenant:        producer.Tenant{TenantKind: "organization", TenantID: "acme", WorkspaceID: "ws-soak"},
		CorrelationID: fmt.Sprintf("corr-%s-%d", prefix, r), OperationID: opID(prefix, r),
		CausationID: fmt.Sprintf("cause-%s-%d", prefix, r), Payload: json.RawMessage(`{"runId":"run-duplicate"}`)})
	if err != nil {
		return fmt.Errorf("append rejected event: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	done([]string{res.EventID})
	return nil
}
