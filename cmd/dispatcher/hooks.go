//go:build !failpoints

package main

import "github.com/oceanway/pgoutbox/dispatcher"

// testHooks is nil in every build but the crash tests' (-tags failpoints, hooks_failpoints.go):
// the product binary carries no test hook, and refuses PGOUTBOX_FAILPOINTS.
var testHooks func(env dispatcher.Env, production bool) (func(string), error)
