//go:build !failpoints

package main

import (
	"errors"
	"strings"
)

// The cutover caller's hook points (SPEC T-10, R-PV-2, R-PV-3): outboxctl projection build /
// freeze / pause / cutover / rollback hit them right after the named call returned (committed),
// before anything is printed. Only a test build (-tags failpoints, hooks_failpoints.go) acts on
// them; in this build hook does nothing.
const (
	projectionAfterBuild   = "projection_after_build"   // start_shadow_build committed
	projectionAfterFreeze  = "projection_after_freeze"  // freeze_cutover_candidate committed (token rotated)
	projectionAfterPause   = "projection_after_pause"   // pause_destination_claims committed
	projectionAfterCutover = "projection_after_cutover" // cutover_projection committed (switched or blocked)
)

func hook(string) {}

// configureHooks refuses an environment that asks for failpoints: this build has none.
func configureHooks(env func(string) (string, bool)) error {
	if v, _ := env("PGOUTBOX_FAILPOINTS"); strings.TrimSpace(v) != "" {
		return errors.New("PGOUTBOX_FAILPOINTS is set but this outboxctl is built without failpoints (they exist only in test builds: go build -tags failpoints)")
	}
	return nil
}
