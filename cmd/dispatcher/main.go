// Command dispatcher runs the pgoutbox delivery loop (SPEC §8). All logic lives in the public
// package github.com/oceanway/pgoutbox/dispatcher; this wrapper only turns SIGTERM/SIGINT into a
// graceful drain (R-DP-3). A program that embeds the dispatcher instead calls dispatcher.New and
// Run itself (examples/embedded).
//
//	PGOUTBOX_DATABASE_URL=postgres://… dispatcher -config /etc/pgoutbox/dispatcher.toml
//
// Configuration reference: docs/dispatcher.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/oceanway/pgoutbox/dispatcher"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := dispatcher.Process(ctx, os.Args[1:], os.LookupEnv, os.Stderr, dispatcher.ProcessOptions{Hooks: testHooks})
	stop()
	os.Exit(code)
}
