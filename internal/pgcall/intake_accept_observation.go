package pgcall

import (
	"context"
	"encoding/json"
	"errors"
)

const acceptObservationSQL = `SELECT outcome, coalesce(observation_id::text, ''), accepted_at,
       coalesce(submission_payload_sha256, ''), coalesce(accepted_envelope_sha256, ''), coalesce(sqlstate, ''), coalesce(detail, '')
FROM intake.accept_observation($1::json)`

// AcceptObservation calls intake.accept_observation with one Submission@1 document: the same
// rules and row as AcceptObservations of one item. Errors: ErrNotAWorkload (OB704). Caller
// role: a workload role, member of outbox_intake.
func AcceptObservation(ctx context.Context, db DBTX, submission json.RawMessage) (ObservationOutcome, error) {
	out, err := scanObservationOutcomes(db.Query(ctx, acceptObservationSQL, string(submission)))
	if err != nil {
		return ObservationOutcome{}, err
	}
	if len(out) != 1 {
		return ObservationOutcome{}, errors.New("accept observation: expected one row")
	}
	return out[0], nil
}
