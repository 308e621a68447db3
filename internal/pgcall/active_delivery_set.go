package pgcall

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// ActiveSet is the row of outbox.active_delivery_set.
type ActiveSet struct {
	Quartet
	ActivatedAt   *time.Time
	SourceRelease string
}

// ErrNoActiveDeliverySet is returned by ActiveDeliverySet when no version is active.
var ErrNoActiveDeliverySet = errors.New("no active delivery set")

const activeDeliverySetSQL = `SELECT delivery_set_version, definition_schema_version, digest_algorithm_version,
       definition_digest, activated_at, source_release
FROM outbox.active_delivery_set()`

// ActiveDeliverySet calls outbox.active_delivery_set; ErrNoActiveDeliverySet when none is
// active (SPEC R-DS-5, R-DP-6). Caller roles: outbox_dispatcher, outbox_auditor.
func ActiveDeliverySet(ctx context.Context, db DBTX) (ActiveSet, error) {
	var a ActiveSet
	err := db.QueryRow(ctx, activeDeliverySetSQL).Scan(&a.DeliverySetVersion, &a.DefinitionSchemaVersion,
		&a.DigestAlgorithmVersion, &a.DefinitionDigest, &a.ActivatedAt, &a.SourceRelease)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, ErrNoActiveDeliverySet
	}
	return a, interpretError("active delivery set", err)
}
