package pgcall

import (
	"context"
	"time"
)

// MailboxSourceParams are the arguments of mailbox.register_source (SPEC §13).
type MailboxSourceParams struct {
	Source           string
	HoleReleaseAfter time.Duration
	BackfillDeadline time.Duration
	StartAfter       int64
	HeadBackoffBase  time.Duration // 0: the SQL default (1 second)
	HeadBackoffCap   time.Duration // 0: the SQL default (5 minutes)
	MaxAttempts      int           // 0: the SQL default (10)
}

const registerSourceSQL = `SELECT mailbox.register_source($1::text, $2::interval, $3::interval, $4::bigint,
	coalesce($5::interval, interval '1 second'), coalesce($6::interval, interval '5 minutes'), coalesce($7::int, 10))`

// RegisterMailboxSource calls mailbox.register_source (insert-or-compare; 22023 when the source
// exists with other parameters). Caller role: outbox_registrar.
func RegisterMailboxSource(ctx context.Context, db DBTX, p MailboxSourceParams) error {
	var base, capv *string
	var maxA *int
	if p.HeadBackoffBase > 0 {
		s := intervalString(p.HeadBackoffBase)
		base = &s
	}
	if p.HeadBackoffCap > 0 {
		s := intervalString(p.HeadBackoffCap)
		capv = &s
	}
	if p.MaxAttempts > 0 {
		maxA = &p.MaxAttempts
	}
	_, err := db.Exec(ctx, registerSourceSQL, p.Source, intervalString(p.HoleReleaseAfter), intervalString(p.BackfillDeadline),
		p.StartAfter, base, capv, maxA)
	return interpretError("register mailbox source", err)
}
