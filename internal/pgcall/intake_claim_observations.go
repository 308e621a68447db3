package pgcall

import (
	"context"
	"encoding/json"
	"time"
)

// ClaimedObservation is one row of intake.claim_observations (SPEC R-OB-4): an accepted
// observation leased to the caller. Envelope is the AcceptedObservationEnvelope@1 (nil when the
// payload was purged: every registered projection has its receipt then, only the ack is left).
type ClaimedObservation struct {
	ObservationID          string
	AcceptedAt             time.Time
	LeaseToken             string
	Envelope               json.RawMessage
	AcceptedEnvelopeSHA256 string
}

const claimObservationsSQL = `SELECT observation_id::text, accepted_at, lease_token::text, accepted_envelope::text, accepted_envelope_sha256
FROM intake.claim_observations($1::text, $2::text, $3::integer, $4::interval)`

// ClaimObservations calls intake.claim_observations: leases up to batchSize accepted
// observations of the registered projector consumer to worker, in (acceptedAt, observationId)
// order. Errors: 22023 worker, batch size (1..1000) or lease (1s..1h) out of range; OB802
// consumer not a registered observation projector. Caller role: outbox_observation_projector.
func ClaimObservations(ctx context.Context, db DBTX, worker, consumerName string, batchSize int, lease time.Duration) ([]ClaimedObservation, error) {
	rows, err := db.Query(ctx, claimObservationsSQL, worker, consumerName, batchSize, lease.String())
	if err != nil {
		return nil, interpretError("claim observations", err)
	}
	defer rows.Close()
	var out []ClaimedObservation
	for rows.Next() {
		var c ClaimedObservation
		var env *string
		if err := rows.Scan(&c.ObservationID, &c.AcceptedAt, &c.LeaseToken, &env, &c.AcceptedEnvelopeSHA256); err != nil {
			return nil, interpretError("claim observations", err)
		}
		if env != nil {
			c.Envelope = json.RawMessage(*env)
		}
		out = append(out, c)
	}
	return out, interpretError("claim observations", rows.Err())
}
