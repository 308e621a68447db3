// Command mailboxpump runs the mailbox inbox pipeline for one source (SPEC §10): discovery by
// msg_id > W, one FIFO head processed in our database's transactions with its outbound events,
// and the processed mark written back to the mailbox. All logic lives in mailbox/pump; this
// wrapper wires in the reference handler (reference.MailboxHandler: any mailbox.Handler can take
// its place, see package github.com/oceanway/pgoutbox/mailbox) and turns SIGTERM/SIGINT into a
// drain (exit 0). A second instance for the same source refuses to run and exits 3. Operator
// guide: docs/mailbox.md.
//
//	PGOUTBOX_DATABASE_URL=postgres://… MAILBOX_DATABASE_URL=postgres://… \
//	    mailboxpump -source legacy-inbox -table public.mailbox
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/oceanway/pgoutbox/mailbox/pump"
	"github.com/oceanway/pgoutbox/reference"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := pump.Process(ctx, os.Args[1:], os.LookupEnv, os.Stderr, reference.NewMailboxHandler)
	stop()
	os.Exit(code)
}
