package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// ObservationRelease is the parsed observation part of a release (SPEC §11a): closed
// observation schemas and observation projectors. The reference release's is
// reference.LoadObservations; a kernel installed without one has no observation schema.
type ObservationRelease struct {
	ReleaseType          string                 `json:"releaseType"`
	ReleaseSchemaVersion int                    `json:"releaseSchemaVersion"`
	ObservationSchemas   []ObservationSchema    `json:"observationSchemas"`
	Projectors           []ObservationProjector `json:"observationProjectors"`
}

// ObservationSchema is one ObservationSchemaDefinition@1 with its type and version.
type ObservationSchema struct {
	ObservationType          string          `json:"observationType"`
	ObservationSchemaVersion int             `json:"observationSchemaVersion"`
	Definition               json.RawMessage `json:"definition"`
}

// ObservationProjector is one registered observation projector.
type ObservationProjector struct {
	ConsumerName      string `json:"consumerName"`
	ProjectionName    string `json:"projectionName"`
	ProjectionVersion int    `json:"projectionVersion"`
}

// ParseObservations parses the observation part of a release and refuses anything but an
// ObservationRelease@1.
func ParseObservations(b []byte) (ObservationRelease, error) {
	var r ObservationRelease
	if err := json.Unmarshal(b, &r); err != nil {
		return r, err
	}
	if r.ReleaseType != "ObservationRelease" || r.ReleaseSchemaVersion != 1 {
		return r, errors.New("not an ObservationRelease@1")
	}
	return r, nil
}

// RegisterObservations registers every schema and projector of r through the intake's
// insert-or-compare functions (the same release again is a no-op; a changed schema under a
// registered version is OB702). db acts as outbox_registrar. It returns the schema digests in
// the release's order.
func RegisterObservations(ctx context.Context, db pgcall.DBTX, r ObservationRelease) ([]string, error) {
	var digests []string
	for _, s := range r.ObservationSchemas {
		d, err := pgcall.RegisterObservationSchema(ctx, db, s.ObservationType, s.ObservationSchemaVersion, s.Definition)
		if err != nil {
			return nil, fmt.Errorf("observation schema %s@%d: %w", s.ObservationType, s.ObservationSchemaVersion, err)
		}
		digests = append(digests, d)
	}
	for _, p := range r.Projectors {
		if err := pgcall.RegisterObservationProjector(ctx, db, p.ConsumerName, p.ProjectionName, p.ProjectionVersion); err != nil {
			return nil, fmt.Errorf("observation projector %s: %w", p.ConsumerName, err)
		}
	}
	return digests, nil
}
