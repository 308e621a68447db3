package pgcall

import "context"

// PublicationSummary counts events, published events (outbox_publications), and events whose every
// mandatory delivery is acknowledged (the two must agree, SPEC R-AK-4, T-5, T-8).
type PublicationSummary struct {
	Events        int64
	Published     int64
	FullyAcked    int64
	NonTerminal   int64 // deliveries still pending or leased
	AttemptStarts int64
	OpenAttempts  int64 // starts without a finish
}

const publicationSummarySQL = `SELECT
    (SELECT count(*) FROM outbox.outbox_events),
    (SELECT count(*) FROM outbox.outbox_publications),
    (SELECT count(*) FROM outbox.outbox_events e WHERE NOT EXISTS (
        SELECT 1 FROM outbox.outbox_deliveries d WHERE d.event_id = e.event_id AND d.mandatory AND d.status <> 'acknowledged')),
    (SELECT count(*) FROM outbox.outbox_deliveries WHERE status IN ('pending', 'leased')),
    (SELECT count(*) FROM outbox.outbox_delivery_attempt_starts),
    (SELECT count(*) FROM outbox.outbox_delivery_attempt_starts s
      WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_delivery_attempt_finishes f WHERE f.attempt_id = s.attempt_id))`

// ReadPublicationSummary reads the counts (full scans: for demos, tests and reports, not for
// metrics). Caller role: outbox_auditor.
func ReadPublicationSummary(ctx context.Context, db DBTX) (PublicationSummary, error) {
	var s PublicationSummary
	err := db.QueryRow(ctx, publicationSummarySQL).Scan(&s.Events, &s.Published, &s.FullyAcked, &s.NonTerminal,
		&s.AttemptStarts, &s.OpenAttempts)
	return s, interpretError("publication summary", err)
}
