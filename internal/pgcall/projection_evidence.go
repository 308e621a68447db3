package pgcall

import "context"

// ProjectionAck is an acknowledged delivery to a projection target, as the producer's database
// recorded it (the receipt evidence the projector's inbox must hold too).
type ProjectionAck struct {
	Destination, ConsumerName, ProjectionName string
	ProjectionVersion                         int
	EventID, EventEnvelopeSHA256              string
}

const projectionAcksSQL = `SELECT d.destination, d.consumer_name, d.required_projection_name, d.required_projection_version,
       d.event_id::text, e.event_envelope_sha256
  FROM outbox.outbox_deliveries d JOIN outbox.outbox_events e ON e.event_id = d.event_id
 WHERE d.status = 'acknowledged' AND d.required_projection_name IS NOT NULL
UNION ALL
SELECT a.destination, a.row_image ->> 'consumer_name', a.row_image ->> 'required_projection_name',
       (a.row_image ->> 'required_projection_version')::int, a.event_id::text, e.event_envelope_sha256
  FROM outbox.archived_deliveries a JOIN outbox.archived_events e ON e.event_id = a.event_id
 WHERE a.status = 'acknowledged' AND (a.row_image ->> 'required_projection_name') IS NOT NULL`

// ProjectionAcks lists every acknowledged projection delivery (hot and archived) of the
// producer's database. Call it in the snapshot's transaction. Caller role: outbox_auditor.
func ProjectionAcks(ctx context.Context, db DBTX) ([]ProjectionAck, error) {
	rows, err := db.Query(ctx, projectionAcksSQL)
	if err != nil {
		return nil, interpretError("projection acks", err)
	}
	defer rows.Close()
	var out []ProjectionAck
	for rows.Next() {
		var a ProjectionAck
		if err := rows.Scan(&a.Destination, &a.ConsumerName, &a.ProjectionName, &a.ProjectionVersion, &a.EventID, &a.EventEnvelopeSHA256); err != nil {
			return nil, interpretError("projection acks", err)
		}
		out = append(out, a)
	}
	return out, interpretError("projection acks", rows.Err())
}

// InboxReceiptKey is a projection receipt held by a projector's inbox.
type InboxReceiptKey struct {
	ConsumerName, ProjectionName string
	ProjectionVersion            int
	EventID, EventEnvelopeSHA256 string
}

const inboxProjectionReceiptsSQL = `SELECT consumer_name, projection_name, projection_version, event_id::text, event_envelope_sha256
  FROM inbox.inbox_receipts WHERE projection_name <> ''`

const inboxOpenGapsSQL = `SELECT consumer_name || '/' || projection_name || '/' || projection_version || '/' || aggregate_id || '@' || expected_revision
  FROM inbox.inbox_revision_gaps WHERE closed_at IS NULL AND projection_name <> ''`

// InboxProjectionEvidence reads, in the projector's inbox database, its projection receipts and
// its open revision gaps ("consumer/projection/version/aggregate@expected"). Call it in one
// REPEATABLE READ transaction. Caller role: outbox_auditor.
func InboxProjectionEvidence(ctx context.Context, db DBTX) ([]InboxReceiptKey, []string, error) {
	rows, err := db.Query(ctx, inboxProjectionReceiptsSQL)
	if err != nil {
		return nil, nil, interpretError("inbox receipts", err)
	}
	var rs []InboxReceiptKey
	for rows.Next() {
		var r InboxReceiptKey
		if err := rows.Scan(&r.ConsumerName, &r.ProjectionName, &r.ProjectionVersion, &r.EventID, &r.EventEnvelopeSHA256); err != nil {
			rows.Close()
			return nil, nil, interpretError("inbox receipts", err)
		}
		rs = append(rs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, interpretError("inbox receipts", err)
	}
	grows, err := db.Query(ctx, inboxOpenGapsSQL)
	if err != nil {
		return nil, nil, interpretError("inbox gaps", err)
	}
	defer grows.Close()
	var gaps []string
	for grows.Next() {
		var g string
		if err := grows.Scan(&g); err != nil {
			return nil, nil, interpretError("inbox gaps", err)
		}
		gaps = append(gaps, g)
	}
	return rs, gaps, interpretError("inbox gaps", grows.Err())
}
