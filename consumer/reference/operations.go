package reference

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
)

// Projection outcomes the operations receipt records (field "projectionOutcome").
const (
	OutcomeOperationCreated   = "operation_created"
	OutcomeReservationLinked  = "reservation_linked"
	OutcomeReservationPending = "reservation_pending_unlinked"
	OutcomeBillingBoundary    = "timeline_appended"
)

// operationsApply projects the operation timeline (SPEC R-OP-1):
//   - run.created@2.0 creates the operation (key: operationId; the run is the aggregate) with a
//     run_created entry, then links every pending wallet reservation of the same operation and
//     correlation;
//   - wallet.reserved@2.0 links to its operation when that run is projected (same operationId
//     and correlationId), otherwise waits in pending_unlinked_reservations: no fake operation;
//   - the seven billing boundary events append a billing_boundary entry to the timeline of
//     their operationId (or aggregateId when the envelope carries none).
func operationsApply(schema string) consumer.ApplyFunc {
	return func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
		if err := countEffect(ctx, tx, schema, ev); err != nil {
			return nil, err
		}
		var outcome string
		var err error
		switch ev.Key() {
		case RunCreated:
			outcome, err = runCreated(ctx, tx, schema, ev)
		case WalletReserved:
			outcome, err = walletReserved(ctx, tx, schema, ev)
		default:
			op := ev.OperationID
			if op == "" {
				op = ev.AggregateID
			}
			err = timeline(ctx, tx, schema, ev.EventID, op, "billing_boundary", ev)
			outcome = OutcomeBillingBoundary
		}
		if err != nil {
			return nil, err
		}
		return consumer.ReceiptFields{"projectionOutcome": outcome}, nil
	}
}

func timeline(ctx context.Context, tx pgx.Tx, schema, eventID, operationID, kind string, ev consumer.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.operation_timeline
    (event_id, operation_id, entry_kind, event_type, event_schema_version, aggregate_id, aggregate_revision, occurred_at)
VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, $8::timestamptz)`,
		eventID, operationID, kind, ev.EventType, ev.EventSchemaVersion, ev.AggregateID, ev.AggregateRevision, ev.OccurredAt)
	return err
}

var errRefinement = errors.New("envelope lacks the fields its pair requires (R-AP-7)")

func runCreated(ctx context.Context, tx pgx.Tx, schema string, ev consumer.Event) (string, error) {
	if ev.OperationID == "" || ev.CorrelationID == "" {
		return "", consumer.Reject(consumer.CodeEnvelopeInvalid, "run_created_refinement", errRefinement)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO `+schema+`.operations
    (operation_id, run_id, correlation_id, tenant_id, workspace_id, created_event_id, occurred_at)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::uuid, $7::timestamptz)
ON CONFLICT (operation_id) DO NOTHING`,
		ev.OperationID, ev.AggregateID, ev.CorrelationID, ev.Tenant.TenantID, ev.Tenant.WorkspaceID, ev.EventID, ev.OccurredAt)
	if err != nil {
		return "", err
	}
	if tag.RowsAffected() == 0 {
		// A second, different run.created for the same operation: a producer-side conflict.
		return "", consumer.Reject(consumer.CodeConsumerRejected, "operation_already_created", nil)
	}
	if err := timeline(ctx, tx, schema, ev.EventID, ev.OperationID, "run_created", ev); err != nil {
		return "", err
	}
	// Link the wallet reservations that arrived first.
	rows, err := tx.Query(ctx, `UPDATE `+schema+`.pending_unlinked_reservations
   SET linked_at = now(), linked_run_id = $3::text
 WHERE operation_id = $1::text AND correlation_id = $2::text AND linked_at IS NULL
RETURNING event_id::text, reservation_id, aggregate_revision, occurred_at`, ev.OperationID, ev.CorrelationID, ev.AggregateID)
	if err != nil {
		return "", err
	}
	type pending struct {
		eventID, reservationID string
		rev                    int64
		wallet                 consumer.Event
	}
	var linked []pending
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.eventID, &p.reservationID, &p.rev, &p.wallet.OccurredAt); err != nil {
			rows.Close()
			return "", err
		}
		linked = append(linked, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	for _, p := range linked {
		w := p.wallet
		w.EventType, w.EventSchemaVersion = WalletReserved.EventType, WalletReserved.SchemaVersion
		w.AggregateID, w.AggregateRevision = p.reservationID, p.rev
		if err := timeline(ctx, tx, schema, p.eventID, ev.OperationID, "wallet_reserved", w); err != nil {
			return "", err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+schema+`.operations SET reservation_id = $2::text WHERE operation_id = $1::text`,
			ev.OperationID, p.reservationID); err != nil {
			return "", err
		}
	}
	return OutcomeOperationCreated, nil
}

func walletReserved(ctx context.Context, tx pgx.Tx, schema string, ev consumer.Event) (string, error) {
	if ev.OperationID == "" || ev.CorrelationID == "" || ev.CausationID == "" {
		return "", consumer.Reject(consumer.CodeEnvelopeInvalid, "wallet_reserved_refinement", errRefinement)
	}
	tag, err := tx.Exec(ctx, `UPDATE `+schema+`.operations SET reservation_id = $3::text
 WHERE operation_id = $1::text AND correlation_id = $2::text`, ev.OperationID, ev.CorrelationID, ev.AggregateID)
	if err != nil {
		return "", err
	}
	if tag.RowsAffected() == 1 {
		if err := timeline(ctx, tx, schema, ev.EventID, ev.OperationID, "wallet_reserved", ev); err != nil {
			return "", err
		}
		return OutcomeReservationLinked, nil
	}
	// Wallet first: wait, unlinked, until the run event is projected (R-OP-1).
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.pending_unlinked_reservations
    (event_id, operation_id, correlation_id, reservation_id, aggregate_revision, occurred_at)
VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::bigint, $6::timestamptz)`,
		ev.EventID, ev.OperationID, ev.CorrelationID, ev.AggregateID, ev.AggregateRevision, ev.OccurredAt); err != nil {
		return "", err
	}
	return OutcomeReservationPending, nil
}
