package reference

import (
	"context"
	"encoding/json"
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
//   - wallet.reserved@2.0 links to its operation when that run is projected and the link is
//     proven: same operationId and correlationId, causationId = the run event's id (the run
//     event caused the reservation) and the same tenant (kind, id, workspace). Otherwise it
//     waits in pending_unlinked_reservations - no fake operation, and no link to an operation
//     that shares its ids but was created by another run event or for another tenant;
//   - the seven billing boundary events append a billing_boundary entry to the timeline of
//     their operationId (or aggregateId when the envelope carries none).
//
// In the same transaction it maintains the exact-identifier index and the projection run
// summary (inbox.record_projection_ids, SPEC R-OP-1, R-OP-3).
func operationsApply(s Spec, schema string) consumer.ApplyFunc {
	return func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
		if err := countEffect(ctx, tx, schema, ev); err != nil {
			return nil, err
		}
		var outcome string
		var err error
		switch ev.Key() {
		case RunCreated:
			outcome, err = runCreated(ctx, tx, s, schema, ev)
		case WalletReserved:
			outcome, err = walletReserved(ctx, tx, s, schema, ev)
		default:
			op := ev.OperationID
			if op == "" {
				op = ev.AggregateID
			}
			err = timeline(ctx, tx, schema, ev.EventID, op, "billing_boundary", ev)
			if err == nil {
				err = indexIDs(ctx, tx, s, ev.EventID, op, eventIDs(ev))
			}
			outcome = OutcomeBillingBoundary
		}
		if err != nil {
			return nil, err
		}
		return consumer.ReceiptFields{"projectionOutcome": outcome}, nil
	}
}

// eventIDs are the exact identifiers an event carries (R-OP-3 kinds); run and reservation ids
// come from the aggregate of run.created / wallet.reserved and from the payload's runId and
// reservationId when present.
func eventIDs(ev consumer.Event) map[string][]string {
	ids := map[string][]string{"eventId": {ev.EventID}}
	add := func(kind, v string) {
		if v == "" || len(v) > 200 {
			return
		}
		for _, have := range ids[kind] {
			if have == v {
				return
			}
		}
		ids[kind] = append(ids[kind], v)
	}
	add("operationId", ev.OperationID)
	add("correlationId", ev.CorrelationID)
	add("causationId", ev.CausationID)
	var p struct {
		RunID         any `json:"runId"`
		ReservationID any `json:"reservationId"`
	}
	_ = json.Unmarshal(ev.Payload, &p)
	str := func(v any) string { s, _ := v.(string); return s }
	switch ev.Key() {
	case RunCreated:
		add("runId", ev.AggregateID)
		add("runId", str(p.RunID))
	case WalletReserved:
		add("reservationId", ev.AggregateID)
		add("reservationId", str(p.ReservationID))
		add("runId", str(p.RunID))
	}
	return ids
}

// indexIDs writes the exact-identifier index rows of one event and bumps the run summary, in
// the projector's transaction (operationID "" = not linked yet).
func indexIDs(ctx context.Context, tx pgx.Tx, s Spec, eventID, operationID string, ids map[string][]string) error {
	doc, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	var op *string
	if operationID != "" {
		op = &operationID
	}
	_, err = tx.Exec(ctx, `SELECT inbox.record_projection_ids($1::text, $2::text, $3::integer, $4::uuid, $5::text, $6::json)`,
		s.ConsumerName, s.ProjectionName, s.ProjectionVersion, eventID, op, string(doc))
	return err
}

func timeline(ctx context.Context, tx pgx.Tx, schema, eventID, operationID, kind string, ev consumer.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.operation_timeline
    (event_id, operation_id, entry_kind, event_type, event_schema_version, aggregate_id, aggregate_revision, occurred_at)
VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, $8::timestamptz)`,
		eventID, operationID, kind, ev.EventType, ev.EventSchemaVersion, ev.AggregateID, ev.AggregateRevision, ev.OccurredAt)
	return err
}

var errRefinement = errors.New("envelope lacks the fields its pair requires (R-AP-7)")

// lockOperation serializes the run.created and wallet.reserved of one operation on a row of
// operation_locks (created on first use): whichever commits first, the other sees it (R-OP-1).
func lockOperation(ctx context.Context, tx pgx.Tx, schema, operationID string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.operation_locks (operation_id) VALUES ($1::text) ON CONFLICT DO NOTHING`, operationID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `SELECT 1 FROM `+schema+`.operation_locks WHERE operation_id = $1::text FOR UPDATE`, operationID)
	return err
}

func runCreated(ctx context.Context, tx pgx.Tx, s Spec, schema string, ev consumer.Event) (string, error) {
	if ev.OperationID == "" || ev.CorrelationID == "" {
		return "", consumer.Reject(consumer.CodeEnvelopeInvalid, "run_created_refinement", errRefinement)
	}
	if err := lockOperation(ctx, tx, schema, ev.OperationID); err != nil {
		return "", err
	}
	tag, err := tx.Exec(ctx, `INSERT INTO `+schema+`.operations
    (operation_id, run_id, correlation_id, tenant_id, workspace_id, created_event_id, occurred_at, tenant_kind)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::uuid, $7::timestamptz, $8::text)
ON CONFLICT (operation_id) DO NOTHING`,
		ev.OperationID, ev.AggregateID, ev.CorrelationID, ev.Tenant.TenantID, ev.Tenant.WorkspaceID, ev.EventID, ev.OccurredAt, ev.Tenant.TenantKind)
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
	if err := indexIDs(ctx, tx, s, ev.EventID, ev.OperationID, eventIDs(ev)); err != nil {
		return "", err
	}
	// Link the wallet reservations that arrived first: caused by this run event, same tenant.
	rows, err := tx.Query(ctx, `UPDATE `+schema+`.pending_unlinked_reservations
   SET linked_at = now(), linked_run_id = $3::text
 WHERE operation_id = $1::text AND correlation_id = $2::text AND linked_at IS NULL
   AND causation_id = $4::text AND tenant_kind = $5::text AND tenant_id = $6::text AND workspace_id = $7::text
RETURNING event_id::text, reservation_id, aggregate_revision, occurred_at`, ev.OperationID, ev.CorrelationID, ev.AggregateID,
		ev.EventID, ev.Tenant.TenantKind, ev.Tenant.TenantID, ev.Tenant.WorkspaceID)
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
		// The index rows of the reservation now link to the operation.
		if err := indexIDs(ctx, tx, s, p.eventID, ev.OperationID, map[string][]string{"eventId": {p.eventID}}); err != nil {
			return "", err
		}
	}
	return OutcomeOperationCreated, nil
}

func walletReserved(ctx context.Context, tx pgx.Tx, s Spec, schema string, ev consumer.Event) (string, error) {
	if ev.OperationID == "" || ev.CorrelationID == "" || ev.CausationID == "" {
		return "", consumer.Reject(consumer.CodeEnvelopeInvalid, "wallet_reserved_refinement", errRefinement)
	}
	if err := lockOperation(ctx, tx, schema, ev.OperationID); err != nil {
		return "", err
	}
	// The run of this operation, if projected: link only on proven causation and tenant.
	var causedBy, tkind, tid, ws, corr string
	err := tx.QueryRow(ctx, `SELECT created_event_id::text, coalesce(tenant_kind, ''), tenant_id, workspace_id, correlation_id
  FROM `+schema+`.operations WHERE operation_id = $1::text FOR UPDATE`, ev.OperationID).Scan(&causedBy, &tkind, &tid, &ws, &corr)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	if errors.Is(err, pgx.ErrNoRows) || causedBy != ev.CausationID || corr != ev.CorrelationID ||
		tkind != ev.Tenant.TenantKind || tid != ev.Tenant.TenantID || ws != ev.Tenant.WorkspaceID {
		// Wallet first, or an operation this reservation was not caused by (shared ids only):
		// wait, unlinked, until its own run event is projected - no fake operation, no guessed
		// link (R-OP-1).
		if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.pending_unlinked_reservations
    (event_id, operation_id, correlation_id, reservation_id, aggregate_revision, occurred_at,
     causation_id, tenant_kind, tenant_id, workspace_id)
VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::bigint, $6::timestamptz, $7::text, $8::text, $9::text, $10::text)`,
			ev.EventID, ev.OperationID, ev.CorrelationID, ev.AggregateID, ev.AggregateRevision, ev.OccurredAt,
			ev.CausationID, ev.Tenant.TenantKind, ev.Tenant.TenantID, ev.Tenant.WorkspaceID); err != nil {
			return "", err
		}
		if err := indexIDs(ctx, tx, s, ev.EventID, "", eventIDs(ev)); err != nil {
			return "", err
		}
		return OutcomeReservationPending, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE `+schema+`.operations SET reservation_id = $2::text WHERE operation_id = $1::text`,
		ev.OperationID, ev.AggregateID); err != nil {
		return "", err
	}
	if err := timeline(ctx, tx, schema, ev.EventID, ev.OperationID, "wallet_reserved", ev); err != nil {
		return "", err
	}
	if err := indexIDs(ctx, tx, s, ev.EventID, ev.OperationID, eventIDs(ev)); err != nil {
		return "", err
	}
	return OutcomeReservationLinked, nil
}
