package reference

import (
	"context"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// Outcomes of refmailbox.apply_reference_effect.
const (
	EffectApplied   = "applied"
	EffectDuplicate = "duplicate"
)

const applyReferenceEffectSQL = `SELECT outcome, revision FROM refmailbox.apply_reference_effect($1::text, $2::bigint, $3::uuid, $4::text, $5::text, $6::text)`

// ApplyReferenceEffect calls refmailbox.apply_reference_effect (mailbox_effect.sql) inside the
// handler's transaction: binds a business identity once and returns (applied, the key's next
// sequence) or (duplicate, the bound revision) (R-MX-9). Caller role: outbox_mailbox.
func ApplyReferenceEffect(ctx context.Context, db pgcall.DBTX, source string, msgID int64, leaseToken, identity, key, typ string) (string, int64, error) {
	var outcome string
	var rev int64
	err := db.QueryRow(ctx, applyReferenceEffectSQL, source, msgID, leaseToken, identity, key, typ).Scan(&outcome, &rev)
	return outcome, rev, pgcall.InterpretError("apply reference effect", err)
}
