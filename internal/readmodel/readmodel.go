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
	return s, nil
}

// writeFunctions are kernel functions an auditor-only session must not be able to execute.
var writeFunctions = []string{
	"outbox.append_events(json,text[],text[])", "outbox.ack_deliveries(json)", "outbox.claim_deliveries(text,text[],integer,interval,text)",
	"outbox.redeliver_quarantined(text,uuid,text,text,text)", "outbox.archive_events(interval,integer)",
	"outbox.register_delivery_set(json,text)", "inbox.record_receipt(text,text,integer,json,json,text)",
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
