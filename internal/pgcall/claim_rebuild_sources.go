package pgcall

import (
	"context"
	"encoding/json"
)

// Kinds of rebuild sources.
const (
	RebuildSourceEvent       = "event"
	RebuildSourceObservation = "observation"
)

// RebuildSource is one row of outbox.claim_rebuild_sources: an event (EventEnvelope@1) or an
// accepted observation (AcceptedObservationEnvelope@1) with its jcs-sha256-v1 digest.
type RebuildSource struct {
	Kind           string
	ID             string
	Envelope       json.RawMessage
	EnvelopeSHA256 string
}

const claimRebuildSourcesSQL = `SELECT source_kind, source_id::text, envelope::text, envelope_sha256
FROM outbox.claim_rebuild_sources($1::uuid, $2::uuid, $3::integer)`

// ClaimRebuildSources calls outbox.claim_rebuild_sources (SPEC R-PV-1): the next batchSize
// (1..1000) sources of the build, each once per build, in (source time, kind, id) order; an
// empty result means the build has caught up for now. ErrFencingRejected (OB001) unknown,
// abandoned or rotated build token. Caller role: outbox_projector.
func ClaimRebuildSources(ctx context.Context, db DBTX, buildID, buildToken string, batchSize int) ([]RebuildSource, error) {
	rows, err := db.Query(ctx, claimRebuildSourcesSQL, buildID, buildToken, batchSize)
	if err != nil {
		return nil, interpretError("claim rebuild sources", err)
	}
	defer rows.Close()
	var out []RebuildSource
	for rows.Next() {
		var s RebuildSource
		var env string
		if err := rows.Scan(&s.Kind, &s.ID, &env, &s.EnvelopeSHA256); err != nil {
			return nil, interpretError("claim rebuild sources", err)
		}
		s.Envelope = json.RawMessage(env)
		out = append(out, s)
	}
	return out, interpretError("claim rebuild sources", rows.Err())
}
