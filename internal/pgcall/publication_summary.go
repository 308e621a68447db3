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

const publicationSummarySQL = `SELECT events, published, fully_acked, non_terminal, attempt_starts, open_attempts
FROM outbox.publication_summary()`

// ReadPublicationSummary calls outbox.publication_summary() (full scans: for demos, tests and
// reports, not for metrics). Caller role: outbox_auditor.
func ReadPublicationSummary(ctx context.Context, db DBTX) (PublicationSummary, error) {
	var s PublicationSummary
	err := db.QueryRow(ctx, publicationSummarySQL).Scan(&s.Events, &s.Published, &s.FullyAcked, &s.NonTerminal,
		&s.AttemptStarts, &s.OpenAttempts)
	return s, interpretError("publication summary", err)
}
