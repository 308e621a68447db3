package pgcall

import (
	"context"
	"encoding/json"
	"time"
)

// ObservationOutcome is one row of intake.accept_observation(s) (SPEC R-OB-2): Outcome is
// accepted_new | accepted_existing | accepted_existing_purged | conflict | rejected; SQLState is
// "" on acceptance, OB701 for a conflict, OB201/OB702/OB703 for a rejection (OB703's Detail
// carries "retryAfterSeconds=N" for the rate quota). ObservationID is "" when the item had none
// readable; AcceptedAt is zero unless accepted.
type ObservationOutcome struct {
	Outcome                 string
	ObservationID           string
	AcceptedAt              time.Time
	SubmissionPayloadSHA256 string
	AcceptedEnvelopeSHA256  string
	SQLState                string
	Detail                  string
}

const acceptObservationsSQL = `SELECT outcome, coalesce(observation_id::text, ''), accepted_at,
       coalesce(submission_payload_sha256, ''), coalesce(accepted_envelope_sha256, ''), coalesce(sqlstate, ''), coalesce(detail, '')
FROM intake.accept_observations($1::json)`

// AcceptObservations calls intake.accept_observations with a JSON array of Submission@1
// documents: one outcome per item, in input order; an invalid item never stops the others.
// Errors: ErrNotAWorkload (OB704) the session role is not a registered workload; 22023 not an
// array or more than 1000 items. Caller role: a workload role, member of outbox_intake.
func AcceptObservations(ctx context.Context, db DBTX, submissions json.RawMessage) ([]ObservationOutcome, error) {
	return scanObservationOutcomes(db.Query(ctx, acceptObservationsSQL, string(submissions)))
}

func scanObservationOutcomes(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}, err error) ([]ObservationOutcome, error) {
	if err != nil {
		return nil, interpretError("accept observations", err)
	}
	defer rows.Close()
	var out []ObservationOutcome
	for rows.Next() {
		var o ObservationOutcome
		var at *time.Time
		if err := rows.Scan(&o.Outcome, &o.ObservationID, &at, &o.SubmissionPayloadSHA256, &o.AcceptedEnvelopeSHA256, &o.SQLState, &o.Detail); err != nil {
			return nil, interpretError("accept observations", err)
		}
		if at != nil {
			o.AcceptedAt = *at
		}
		out = append(out, o)
	}
	return out, interpretError("accept observations", rows.Err())
}
