package pgcall

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// States of outbox.candidate_progress.
const (
	CandidateBuilding   = "building"
	CandidateFrozen     = "frozen"
	CandidateCatchingUp = "catching_up"
	CandidateReady      = "ready"
	CandidateSwitched   = "switched"
	CandidateBlocked    = "blocked"
	CandidateAbandoned  = "abandoned"
)

// CandidateProgress is the row of outbox.candidate_progress.
type CandidateProgress struct {
	State      string
	Built      int64
	Remaining  int64
	LagSeconds float64
	KnownBuild bool
}

const candidateProgressSQL = `SELECT state, built, remaining, lag_seconds FROM outbox.candidate_progress($1::uuid)`

// CandidateProgressOf calls outbox.candidate_progress (SPEC R-PV-5): the build's state, sources
// handed out, what remains and its lag; KnownBuild false for an unknown build. Caller role:
// outbox_auditor.
func CandidateProgressOf(ctx context.Context, db DBTX, buildID string) (CandidateProgress, error) {
	var p CandidateProgress
	err := db.QueryRow(ctx, candidateProgressSQL, buildID).Scan(&p.State, &p.Built, &p.Remaining, &p.LagSeconds)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	p.KnownBuild = err == nil
	return p, interpretError("candidate progress", err)
}
