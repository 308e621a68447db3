package pgcall

import "context"

const registerObservationProjectorSQL = `SELECT intake.register_observation_projector($1::text, $2::text, $3::integer)`

// RegisterObservationProjector calls intake.register_observation_projector: registers an
// observation projector (the payload purge waits for each registered one's receipt);
// insert-or-compare. Errors: 22023 literal out of form. Caller role: outbox_registrar.
func RegisterObservationProjector(ctx context.Context, db DBTX, consumerName, projectionName string, projectionVersion int) error {
	_, err := db.Exec(ctx, registerObservationProjectorSQL, consumerName, projectionName, projectionVersion)
	return interpretError("register observation projector", err)
}
