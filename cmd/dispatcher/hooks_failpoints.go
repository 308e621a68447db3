//go:build failpoints

package main

import (
	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"
)

// testHooks arms the failpoints named by PGOUTBOX_FAILPOINTS (test builds only: the crash tests
// build this binary with -tags failpoints) and returns their hook; refused outside test mode
// and in production mode (failpoint.Configure).
var testHooks = func(env dispatcher.Env, production bool) (func(string), error) {
	if err := failpoint.Configure(env, production); err != nil {
		return nil, err
	}
	if !failpoint.Armed() {
		return nil, nil
	}
	return failpoint.Inject, nil
}
