package reference

import (
	"embed"
	"encoding/json"
	"fmt"

	"github.com/oceanway/pgoutbox/internal/release"
)

// Releases holds the reference release documents under releases/. They are the OceanWay
// example's, not the kernel's: the kernel's migrations (sql/) install no delivery set and no
// observation schema; `outboxctl release register-reference` and `register-observations`
// register these.
//
//go:embed releases/*.json
var Releases embed.FS

// ReleasePath is the OceanWay first release (SPEC §3.4), a DeliverySetDefinition@1 kept
// without its digest (internal/release computes it), inside Releases.
const ReleasePath = "releases/oceanway-first-release.v1.json"

// SourceRelease is the source_release label the demo and tests register ReleasePath with.
const SourceRelease = "oceanway-first-release"

// ObservationsPath is the reference release's observation part inside Releases (SPEC §11a,
// issue 22 item 4): the closed schemas request_attempt@1 and error_occurrence@1 and the
// reference observation projector. A kernel installed without it has no observation schema.
const ObservationsPath = "releases/oceanway-observations.v1.json"

// LoadRelease returns the reference release with its digest.
func LoadRelease() (json.RawMessage, error) {
	b, err := Releases.ReadFile(ReleasePath)
	if err != nil {
		return nil, err
	}
	d, err := release.WithDigest(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ReleasePath, err)
	}
	return d, nil
}

// LoadObservations returns the reference release's observation part.
func LoadObservations() (release.ObservationRelease, error) {
	b, err := Releases.ReadFile(ObservationsPath)
	if err != nil {
		return release.ObservationRelease{}, err
	}
	r, err := release.ParseObservations(b)
	if err != nil {
		return r, fmt.Errorf("%s: %w", ObservationsPath, err)
	}
	return r, nil
}
