// Package readmodel is the operations read model's read-only companion (SPEC §11, R-OP-2..4):
// the status page (HTML, auditor credentials only, no write action, no payloads), the exact-id
// search box behind it, and the read-model gauges (receipt anti-join and proof freshness per
// scope). It only calls the kernel's auditor functions and views through internal/pgcall.
package readmodel

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// MaxScopes bounds how many scopes the page and the gauges show (the newest proofs first), so
// the metric cardinality stays low whatever auditors take proofs of.
const MaxScopes = 20

// Destination is one row of the page: backlog figures and the open quarantine by reason.
type Destination struct {
	pgcall.DestinationStats
	Quarantine []pgcall.QuarantineReason
}

// Status is everything the page shows, read as outbox_auditor.
type Status struct {
	GeneratedAt  time.Time
	Active       *pgcall.ActiveSet // nil when no delivery set is active
	Destinations []Destination
	Proofs       []pgcall.ProofSummary // latest per scope, re-checked now
	Intake       []IntakeHealth        // per registered workload, the last IntakeHorizon
	Observations []pgcall.ConsoleObservation
	Projections  []pgcall.ProjectionVersionRow // registered projection versions (R-PV-5)
	// Progress of each version's latest build that is not abandoned (outbox.candidate_progress),
	// by build id.
	Progress map[string]pgcall.CandidateProgress
	// The most recent cutover readiness proofs (R-PV-2, R-PV-5).
	ReadinessProofs []pgcall.ReadinessProofRow
}

// RecentReadinessProofs bounds the status page's list of readiness proofs.
const RecentReadinessProofs = 10

// LoadProgress reads candidate_progress for every listed version's latest build that is not
// abandoned.
func LoadProgress(ctx context.Context, db pgcall.DBTX, rows []pgcall.ProjectionVersionRow) (map[string]pgcall.CandidateProgress, error) {
	out := map[string]pgcall.CandidateProgress{}
	for _, r := range rows {
		if r.BuildID == nil || (r.BuildState != nil && *r.BuildState == "abandoned") {
			continue
		}
		p, err := pgcall.CandidateProgressOf(ctx, db, *r.BuildID)
		if err != nil {
			return nil, err
		}
		if p.KnownBuild {
			out[*r.BuildID] = p
		}
	}
	return out, nil
}

// MaxProjectionVersions bounds the projection panel and its gauge series.
const MaxProjectionVersions = 100

// The intake panel (SPEC R-OB-5): health over the last IntakeHorizon in windows of IntakeWindow,
// at most MaxWorkloads workloads (gauge cardinality), the RecentObservations newest observations.
const (
	IntakeHorizon      = time.Hour
	IntakeWindow       = 5 * time.Minute
	MaxWorkloads       = 50
	RecentObservations = 20
)

// IntakeHealth sums one workload's health windows: accepted observations, known send failures
// and intake rejections over the horizon, the last acceptance, the health of the newest window
// and the worst health of any window (degraded > unknown > healthy). No coverage percentage:
// there is no authoritative denominator.
type IntakeHealth struct {
	WorkloadPrincipalID string
	Accepted            int
	SendFailures        int
	IntakeRejections    int
	LastAcceptedAt      time.Time
	Latest              string
	Worst               string
}

// LoadIntake reads the health windows of [now-IntakeHorizon, now) and sums them per workload.
func LoadIntake(ctx context.Context, db pgcall.DBTX, now time.Time) ([]IntakeHealth, error) {
	to := now.Truncate(time.Minute).Add(time.Minute)
	ws, err := pgcall.AcceptedHealthWindows(ctx, db, to.Add(-IntakeHorizon), to, IntakeWindow)
	if err != nil {
		return nil, err
	}
	rank := map[string]int{"healthy": 0, "unknown": 1, "degraded": 2}
	by := map[string]*IntakeHealth{}
	var order []string
	latest := map[string]time.Time{}
	for _, w := range ws {
		h := by[w.WorkloadPrincipalID]
		if h == nil {
			if len(order) == MaxWorkloads {
				continue
			}
			h = &IntakeHealth{WorkloadPrincipalID: w.WorkloadPrincipalID, Worst: "healthy"}
			by[w.WorkloadPrincipalID] = h
			order = append(order, w.WorkloadPrincipalID)
		}
		h.Accepted += w.Accepted
		h.SendFailures += w.SendFailures
		h.IntakeRejections += w.IntakeRejections
		if w.LastAcceptedAt.After(h.LastAcceptedAt) {
			h.LastAcceptedAt = w.LastAcceptedAt
		}
		if rank[w.Health] > rank[h.Worst] {
			h.Worst = w.Health
		}
		if !w.WindowStart.Before(latest[w.WorkloadPrincipalID]) {
			latest[w.WorkloadPrincipalID] = w.WindowStart
			h.Latest = w.Health
		}
	}
	sort.Strings(order)
	out := make([]IntakeHealth, 0, len(order))
	for _, id := range order {
		out = append(out, *by[id])
	}
	return out, nil
}

// Load reads the status. The proofs are re-checked against the current state
// (outbox.check_completeness rebuilds each scope's member set: O(events in scope)).
func Load(ctx context.Context, db pgcall.DBTX) (Status, error) {
	s := Status{GeneratedAt: time.Now().UTC()}
	a, err := pgcall.ActiveDeliverySet(ctx, db)
	switch {
	case err == nil:
		s.Active = &a
	case !errors.Is(err, pgcall.ErrNoActiveDeliverySet):
		return s, err
	}
	stats, err := pgcall.DeliveryStats(ctx, db)
	if err != nil {
		return s, err
	}
	reasons, err := pgcall.QuarantineReasons(ctx, db)
	if err != nil {
		return s, err
	}
	by := map[string][]pgcall.QuarantineReason{}
	for _, r := range reasons {
		by[r.Destination] = append(by[r.Destination], r)
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].Destination < stats[j].Destination })
	for _, st := range stats {
		s.Destinations = append(s.Destinations, Destination{DestinationStats: st, Quarantine: by[st.Destination]})
	}
	if s.Proofs, err = pgcall.LatestProofs(ctx, db, MaxScopes); err != nil {
		return s, err
	}
	if s.Intake, err = LoadIntake(ctx, db, s.GeneratedAt); err != nil {
		return s, err
	}
	if s.Observations, err = pgcall.ConsoleObservations(ctx, db, RecentObservations); err != nil {
		return s, err
	}
	if s.Projections, err = pgcall.ConsoleProjectionVersions(ctx, db, MaxProjectionVersions); err != nil {
		return s, err
	}
	if s.Progress, err = LoadProgress(ctx, db, s.Projections); err != nil {
		return s, err
	}
	if s.ReadinessProofs, err = pgcall.ConsoleReadinessProofs(ctx, db, RecentReadinessProofs); err != nil {
		return s, err
	}
	return s, nil
}

// writeFunctions are kernel functions an auditor-only session must not be able to execute.
var writeFunctions = []string{
	"outbox.append_events(json,text[],text[],text,text)", "outbox.ack_deliveries(json)", "outbox.claim_deliveries(text,text[],integer,interval,text)",
	"outbox.redeliver_quarantined(text,uuid,text,text,text)", "outbox.archive_events(interval,integer)",
	"outbox.register_delivery_set(json,text)", "inbox.record_receipt(text,text,integer,json,json,text,uuid)",
	"outbox.register_projection_version(text,integer,text)", "outbox.start_shadow_build(text,integer)", "outbox.claim_rebuild_sources(uuid,uuid,integer)",
	"outbox.pause_destination_claims(text,text)", "outbox.resume_destination_claims(text)",
}

// CheckAuditorOnly refuses a session that is not read-only in the kernel's terms: it must be
// able to execute the read model (outbox_auditor) and none of the kernel's write functions.
func CheckAuditorOnly(ctx context.Context, db pgcall.DBTX) error {
	var canRead bool
	var canWrite []string
	if err := db.QueryRow(ctx, `SELECT has_function_privilege('outbox.take_completeness_snapshot(json)', 'EXECUTE'),
		coalesce(array_agg(f) FILTER (WHERE to_regprocedure(f) IS NOT NULL AND has_function_privilege(f, 'EXECUTE')), '{}')
		FROM unnest($1::text[]) AS f`, writeFunctions).Scan(&canRead, &canWrite); err != nil {
		return fmt.Errorf("check the session's privileges: %w", err)
	}
	if !canRead {
		return errors.New("the session is not outbox_auditor: it cannot execute the read model")
	}
	if len(canWrite) > 0 {
		return fmt.Errorf("the status page runs with auditor credentials only; this session may execute %v", canWrite)
	}
	return nil
}

// operatorWrites are the write functions an operator session must be able to execute: the
// controlled recovery of R-AK-10 and the claim pause and resume of R-PV-2 (incident handling),
// and nothing else of writeFunctions.
var operatorWrites = []string{"outbox.redeliver_quarantined(text,uuid,text,text,text)",
	"outbox.pause_destination_claims(text,text)", "outbox.resume_destination_claims(text)"}

// CheckOperatorOnly refuses a session for the console's actions unless it may execute
// outbox.redeliver_quarantined, outbox.pause_destination_claims and
// outbox.resume_destination_claims and none of the kernel's other write functions
// (outbox_operator).
func CheckOperatorOnly(ctx context.Context, db pgcall.DBTX) error {
	var missing []string
	var canWrite []string
	if err := db.QueryRow(ctx, `SELECT
		coalesce((SELECT array_agg(o) FROM unnest($2::text[]) AS o WHERE NOT has_function_privilege(o, 'EXECUTE')), '{}'),
		coalesce(array_agg(f) FILTER (WHERE NOT (f = ANY ($2::text[])) AND CASE WHEN has_schema_privilege(split_part(f, '.', 1), 'USAGE')
			THEN to_regprocedure(f) IS NOT NULL AND has_function_privilege(f, 'EXECUTE') ELSE false END), '{}')
		FROM unnest($1::text[]) AS f`, writeFunctions, operatorWrites).Scan(&missing, &canWrite); err != nil {
		return fmt.Errorf("check the operator session's privileges: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the operator session is not outbox_operator: it cannot execute %v", missing)
	}
	if len(canWrite) > 0 {
		return fmt.Errorf("the console's operator session may execute only the recovery functions; this one may also execute %v", canWrite)
	}
	return nil
}
