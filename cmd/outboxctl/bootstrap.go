package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// runBootstrap: outboxctl bootstrap SOURCE VERSION SCHEMA ALGORITHM DIGEST [-max-rows N]
// imports a legacy event table against a registered Bootstrap Delivery Set, as outbox_owner,
// one committed transaction per run, until nothing is left (SPEC R-BS-1..4, docs/migrations.md).
func runBootstrap(ctx context.Context, dsn string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	maxRows := fs.Int("max-rows", 10000, "legacy rows per run (one transaction, holding the append lock)")
	once := fs.Bool("once", false, "one run only (default: runs until the source is fully handled)")
	pos, err := parseInterleaved(fs, args) // flags may come after the positional arguments
	if err != nil || len(pos) != 5 {
		return errUsage
	}
	version, err1 := strconv.Atoi(pos[1])
	schema, err2 := strconv.Atoi(pos[2])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%w: VERSION and SCHEMA are integers", errUsage)
	}
	q := pgcall.Quartet{DeliverySetVersion: version, DefinitionSchemaVersion: schema, DigestAlgorithmVersion: pos[3], DefinitionDigest: pos[4]}
	conn, err := connectAs(ctx, dsn, "outbox_owner")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for {
		r, err := pgcall.BootstrapLegacyEvents(ctx, conn, pos[0], q, *maxRows)
		if err != nil {
			return err
		}
		var left int
		if err := conn.QueryRow(ctx, `SELECT rows_left FROM outbox.bootstrap_runs WHERE run_id = $1::uuid`, r.RunID).Scan(&left); err != nil {
			return fmt.Errorf("read evidence row: %w", err)
		}
		fmt.Fprintf(out, "run %s imported %d quarantined %d already_present %d rows_left %d evidence_sha256 %s\n",
			r.RunID, r.Imported, r.Quarantined, r.AlreadyPresent, left, r.EvidenceSHA256)
		if *once || left == 0 {
			return nil
		}
	}
}
