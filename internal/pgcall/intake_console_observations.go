package pgcall

import (
	"context"
	"time"
)

// ConsoleObservation is one row of intake.console_observations: an accepted observation without
// its body. ObservationType and SchemaVersion are nil once the payload was purged.
type ConsoleObservation struct {
	ObservationID       string
	AcceptedAt          time.Time
	WorkloadPrincipalID string
	ObservationType     *string
	SchemaVersion       *int
	PayloadPurged       bool
	OpenProjectors      int
}

const consoleObservationsSQL = `SELECT observation_id::text, accepted_at, workload_principal_id, observation_type,
	observation_schema_version, payload_purged, open_projectors FROM intake.console_observations($1::int)`

// ConsoleObservations calls intake.console_observations: the limit (1..1000, else 22023) most
// recently accepted observations, newest first. Caller role: outbox_auditor.
func ConsoleObservations(ctx context.Context, db DBTX, limit int) ([]ConsoleObservation, error) {
	rows, err := db.Query(ctx, consoleObservationsSQL, limit)
	if err != nil {
		return nil, interpretError("console observations", err)
	}
	defer rows.Close()
	var out []ConsoleObservation
	for rows.Next() {
		var o ConsoleObservation
		if err := rows.Scan(&o.ObservationID, &o.AcceptedAt, &o.WorkloadPrincipalID, &o.ObservationType, &o.SchemaVersion,
			&o.PayloadPurged, &o.OpenProjectors); err != nil {
			return nil, interpretError("console observations", err)
		}
		out = append(out, o)
	}
	return out, interpretError("console observations", rows.Err())
}
