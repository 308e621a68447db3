package pgcall

import (
	"context"
	"encoding/json"
)

const recordProjectionIDsSQL = `SELECT inbox.record_projection_ids($1::text, $2::text, $3::integer, $4::uuid, $5::text, $6::json)`

// RecordProjectionIDs calls inbox.record_projection_ids in the projector's transaction (SPEC
// R-OP-1, R-OP-3): the exact-identifier index rows of one event (ids: identifier kind → values)
// and the projection run summary of projectionName@projectionVersion. operationID "" is NULL (the
// event is not linked to an operation yet). 42501 consumer not bound to the caller, 22023
// malformed ids. Caller role: outbox_consumer.
func RecordProjectionIDs(ctx context.Context, db DBTX, consumerName, projectionName string, projectionVersion int,
	eventID, operationID string, ids map[string][]string) error {
	doc, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	var op *string
	if operationID != "" {
		op = &operationID
	}
	_, err = db.Exec(ctx, recordProjectionIDsSQL, consumerName, projectionName, projectionVersion, eventID, op, string(doc))
	return interpretError("record projection ids", err)
}
