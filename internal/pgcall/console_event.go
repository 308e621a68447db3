package pgcall

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// ConsoleEvent is the row of outbox.console_event: one event's envelope metadata, digest,
// delivery-set quartet and publication time (PublishedAt nil while not published). It never
// carries the payload, only its size.
type ConsoleEvent struct {
	EventID                 string
	EventType               string
	SchemaVersion           string
	DeliverySetVersion      int
	DefinitionSchemaVersion int
	DigestAlgorithmVersion  string
	DefinitionDigest        string
	AggregateID             string
	AggregateRevision       int64
	TenantKind              string
	TenantID                string
	WorkspaceID             string
	ProjectID               *string
	CorrelationID           *string
	CausationID             *string
	OperationID             *string
	EnvelopeDigestAlgorithm string
	EnvelopeSHA256          string
	OccurredAt              time.Time
	CreatedAt               time.Time
	PublishedAt             *time.Time
	PayloadBytes            int
}

// ErrEventNotFound: outbox.console_event has no row for the id (unknown, or archived).
var ErrEventNotFound = errors.New("event not found in the hot tables")

const consoleEventSQL = `SELECT event_id::text, event_type, schema_version, delivery_set_version, definition_schema_version,
       digest_algorithm_version, definition_digest, aggregate_id, aggregate_revision, tenant_kind, tenant_id,
       workspace_id, project_id, correlation_id, causation_id, operation_id,
       event_envelope_digest_algorithm_version, event_envelope_sha256, occurred_at, created_at, published_at, payload_bytes
FROM outbox.console_event($1::uuid)`

// ConsoleEventByID calls outbox.console_event. ErrEventNotFound when there is no such event in the
// hot tables; 22023 for a NULL id. Caller role: outbox_auditor.
func ConsoleEventByID(ctx context.Context, db DBTX, eventID string) (ConsoleEvent, error) {
	var e ConsoleEvent
	err := db.QueryRow(ctx, consoleEventSQL, eventID).Scan(&e.EventID, &e.EventType, &e.SchemaVersion,
		&e.DeliverySetVersion, &e.DefinitionSchemaVersion, &e.DigestAlgorithmVersion, &e.DefinitionDigest,
		&e.AggregateID, &e.AggregateRevision, &e.TenantKind, &e.TenantID, &e.WorkspaceID, &e.ProjectID,
		&e.CorrelationID, &e.CausationID, &e.OperationID, &e.EnvelopeDigestAlgorithm, &e.EnvelopeSHA256,
		&e.OccurredAt, &e.CreatedAt, &e.PublishedAt, &e.PayloadBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, ErrEventNotFound
	}
	return e, interpretError("console event", err)
}
