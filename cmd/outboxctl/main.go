// Command outboxctl is the operator's and auditor's tool: register and activate delivery-set
// releases, list them, print the grant matrix and trigger list (audit), show delivery status,
// recover quarantined deliveries, run and verify archives, take and check completeness proofs,
// serve the console, bootstrap legacy events, operate the mailbox pipeline and drive projection
// versions (build, freeze, cutover, rollback). It only calls the kernel's SQL functions and reads
// its views.
//
//	outboxctl [-db URL] COMMAND ...    (outboxctl with no command prints the usage)
//
// The database URL comes from -db, else PGOUTBOX_URL, else DATABASE_URL.
// Every command with its arguments: docs/operations.md#cmdoutboxctl.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: outboxctl [-db URL] COMMAND
commands:
  release register FILE [SOURCE_RELEASE]   compute the digest of FILE and register it (as outbox_registrar)
  release register-reference               register the OceanWay first release shipped in reference/releases/
  release register-observations            register the reference observation schemas (request_attempt@1,
                                           error_occurrence@1) and the reference observation projector
  release activate VERSION SCHEMA ALGORITHM DIGEST
  release activate FILE [SOURCE_RELEASE]   register FILE (a no-op when registered identically) and activate it
  release activate-reference               activate the reference release (registering it if needed)
  release list                             registered definitions with status
  reference install                        install the reference release on a migrated database (make
                                           migrate-reference): receipt kinds, destinations, refinements,
                                           projection version, observation schemas (as outbox_registrar)
                                           and the reference schemas (as the connecting user); rerun: no-op
  audit                                    grant matrix and trigger list, stable text for diffs
  status                                   per-destination delivery status (read-only)
  quarantine list [--destination D] [--reason R]
                                           deliveries quarantined now (read-only, as outbox_auditor)
  quarantine preview D EVENT               what a re-delivery would do (changes nothing)
  quarantine redeliver D EVENT --case C --reason TEXT --key K [--yes]
                                           re-deliver the original event (as outbox_operator, audited)
  archive run [-older-than 2160h] [-max-rows 1000] [-batches 1]
                                           audited retention run(s) (as outbox_retention)
  archive verify RUN_ID                    recompute and compare an archive run (as outbox_auditor)
  archive holds list                       legal holds with their audit (as outbox_auditor)
  archive holds set EVENT_ID REASON | release EVENT_ID
                                           place / release a legal hold (as outbox_retention)
  proof take [-inbox-db URL] [SCOPE_JSON]  completeness proof of the scope (default {}) (as outbox_auditor);
                                           -inbox-db: the projector's inbox is another database (two-part proof)
  proof check MANIFEST_ID                  re-check a proof against the current state
  proof show MANIFEST_ID                   print the CompletenessProofManifest document (@2; @1 before migration 037)
  proof search KIND ID                     exact-id search (eventId, operationId, correlationId, runId,
                                           reservationId, causationId)
  serve [-listen 127.0.0.1:8089] [-operator] [-show-payloads] [-refresh 5s]
                                           status page /status, read-model /metrics and operator console /console
                                           (as outbox_auditor; -operator adds the audited redeliver and claim pause/resume as outbox_operator)
  bootstrap SOURCE VERSION SCHEMA ALGORITHM DIGEST [-max-rows 10000] [-once]
                                           import a legacy event table (as outbox_owner; docs/migrations.md)
  mailbox status SOURCE | mailbox resolve SOURCE MSG_ID RESOLUTION NOTE   mailbox pipeline (docs/mailbox.md)
  projection list                          registered projection versions, state, content rows, latest build
  projection register NAME VERSION DIGEST  register a version (semantic definition digest or unknown; as outbox_registrar)
  projection rows NAME VERSION RELATION    name the relation of a version's content rows (row_key, row_document)
  projection build NAME VERSION            start a shadow build (as outbox_projector); prints its id and token
  projection digest NAME VERSION           the version's content digest (as outbox_auditor)
  projection compare NAME A B              compare two versions: digests, rows, receipt anti-join, gaps, quarantine
  projection progress BUILD                a build's state with a progress bar (built / remaining, lag)
  projection freeze BUILD TOKEN            freeze the cutover boundary (prints the boundary and the new token)
  projection pause DEST REASON | resume DEST
                                           pause / resume claims of a destination (audited)
  projection cutover BUILD TOKEN VERSION SCHEMA ALGORITHM DIGEST
                                           switch (or roll back) to the build's version and activate that delivery set:
                                           switched, or blocked with its reasons (the readiness proof is written either way)
  projection rollback NAME VERSION SETVERSION SCHEMA ALGORITHM DIGEST
                                           roll back to the frozen former version NAME@VERSION by the same protocol
                                           (rollback build, hand-out, freeze, cutover_projection to that delivery set);
                                           rerun it after a crash: a new build abandons the half-done one
  projection proof ID | boundary ID        print a CutoverReadinessProof@1 / CutoverCandidateBoundary@1
  projection retire NAME VERSION | drop NAME VERSION
                                           retire a version (OB809 while targeted or the rollback target) / drop its rows
`

func main() {
	fs := flag.NewFlagSet("outboxctl", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	dsn := fs.String("db", "", "database URL (default $PGOUTBOX_URL, then $DATABASE_URL)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *dsn == "" {
		*dsn = os.Getenv("PGOUTBOX_URL")
	}
	if *dsn == "" {
		*dsn = os.Getenv("DATABASE_URL")
	}
	// Test-only failpoints (SPEC T-10: kill -9 of the cutover caller between its steps): only a
	// test build has them (-tags failpoints), and refuses them unless PGOUTBOX_TEST_MODE=1; any
	// other build refuses PGOUTBOX_FAILPOINTS. A no-op when it is unset.
	if err := configureHooks(os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "outboxctl:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dsn, fs.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "outboxctl:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("bad usage")

func run(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	if dsn == "" {
		return errors.New("no database: pass -db or set PGOUTBOX_URL / DATABASE_URL")
	}
	switch args[0] {
	case "release":
		return runRelease(ctx, dsn, args[1:], out)
	case "reference":
		return runReference(ctx, dsn, args[1:], out)
	case "audit":
		return runAudit(ctx, dsn, args[1:], out)
	case "status":
		return runStatus(ctx, dsn, args[1:], out)
	case "quarantine":
		return runQuarantine(ctx, dsn, args[1:], out)
	case "archive":
		return runArchive(ctx, dsn, args[1:], out)
	case "bootstrap":
		return runBootstrap(ctx, dsn, args[1:], out)
	case "proof":
		return runProof(ctx, dsn, args[1:], out)
	case "serve":
		return runServe(ctx, dsn, args[1:], out)
	case "mailbox":
		return runMailbox(ctx, dsn, args[1:], out)
	case "projection":
		return runProjection(ctx, dsn, args[1:], out)
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}
