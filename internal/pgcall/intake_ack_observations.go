package pgcall

import (
	"context"
	"encoding/json"
)

// ObservationAck is one item of intake.ack_observations.
type ObservationAck struct {
	ConsumerName           string `json:"consumerName"`
	ObservationID          string `json:"observationId"`
	LeaseToken             string `json:"leaseToken"`
	AcceptedEnvelopeSHA256 string `json:"acceptedEnvelopeSha256"`
}

// ObservationAckOutcome is one row of intake.ack_observations: Outcome acknowledged | rejected;
// SQLState "" when acknowledged, else OB001 (no live lease with that token: stale_token,
// lease_expired, not_leased, no_work_row, lease_lost, or finished - the lease already ended, a
// second ack of the same observation included), OB002 (digest mismatch or a registered
// projection's receipt missing) or 22023 (malformed item); Detail says which.
type ObservationAckOutcome struct {
	ObservationID string
	Outcome       string
	SQLState      string
	Detail        string
}

const ackObservationsSQL = `SELECT coalesce(observation_id::text, ''), outcome, coalesce(sqlstate, ''), coalesce(detail, '')
FROM intake.ack_observations($1::json)`

// AckObservations calls intake.ack_observations: one outcome per item, in input order; a
// rejected item changes nothing and never stops the others. Errors: 22023 more than 1000 items.
// Caller role: outbox_observation_projector.
func AckObservations(ctx context.Context, db DBTX, items []ObservationAck) ([]ObservationAckOutcome, error) {
	if items == nil {
		items = []ObservationAck{}
	}
	doc, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, ackObservationsSQL, string(doc))
	if err != nil {
		return nil, interpretError("ack observations", err)
	}
	defer rows.Close()
	var out []ObservationAckOutcome
	for rows.Next() {
		var o ObservationAckOutcome
		if err := rows.Scan(&o.ObservationID, &o.Outcome, &o.SQLState, &o.Detail); err != nil {
			return nil, interpretError("ack observations", err)
		}
		out = append(out, o)
	}
	return out, interpretError("ack observations", rows.Err())
}
