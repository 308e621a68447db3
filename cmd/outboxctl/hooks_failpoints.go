//go:build failpoints

package main

import "github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"

// The cutover caller's crash windows, armed by PGOUTBOX_FAILPOINTS under PGOUTBOX_TEST_MODE=1
// (test builds only: tests/projection builds outboxctl with -tags failpoints).
const (
	projectionAfterBuild   = failpoint.ProjectionAfterBuild
	projectionAfterFreeze  = failpoint.ProjectionAfterFreeze
	projectionAfterPause   = failpoint.ProjectionAfterPause
	projectionAfterCutover = failpoint.ProjectionAfterCutover
)

func hook(point string) { failpoint.Inject(point) }

func configureHooks(env func(string) (string, bool)) error { return failpoint.Configure(env, false) }
