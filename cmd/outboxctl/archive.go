package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// runArchive: the retention procedure for operators (SPEC R-RT-1..4).
//
//	archive run [-older-than DUR] [-max-rows N] [-batches K]   as outbox_retention
//	archive verify RUN_ID                                      as outbox_auditor
//	archive holds list                                         as outbox_auditor
//	archive holds set EVENT_ID REASON | release EVENT_ID       as outbox_retention
func runArchive(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "run":
		fs := flag.NewFlagSet("archive run", flag.ContinueOnError)
		olderThan := fs.Duration("older-than", 90*24*time.Hour, "archive events created longer ago than this")
		maxRows := fs.Int("max-rows", 1000, "events per run (one transaction each)")
		batches := fs.Int("batches", 1, "runs to do at most, stopping early when a run archives nothing")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 {
			return errUsage
		}
		conn, err := connectAs(ctx, dsn, "outbox_retention")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for i := 0; i < *batches; i++ {
			r, err := pgcall.ArchiveEvents(ctx, conn, *olderThan, *maxRows)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "run %s archived %d skipped %d archived_set_sha256 %s\n", r.RunID, r.Archived, r.Skipped, r.ArchivedSetSHA256)
			if r.Archived == 0 {
				break
			}
		}
		return nil
	case "verify":
		if len(args) != 2 {
			return errUsage
		}
		conn, err := connectAs(ctx, dsn, "outbox_auditor")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		v, err := pgcall.VerifyArchiveRun(ctx, conn, args[1])
		if err != nil {
			return err
		}
		if !v.Verified {
			fmt.Fprintf(out, "run %s NOT verified: %s\n", v.RunID, v.Problem)
			return fmt.Errorf("archive run %s failed verification", v.RunID)
		}
		fmt.Fprintf(out, "run %s verified\n", v.RunID)
		return nil
	case "holds":
		return runHolds(ctx, dsn, args[1:], out)
	}
	return fmt.Errorf("%w: unknown archive command %q", errUsage, args[0])
}

func runHolds(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch {
	case args[0] == "list" && len(args) == 1:
		conn, err := connectAs(ctx, dsn, "outbox_auditor")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT event_id::text, reason, set_by, set_at, coalesce(released_by, ''), released_at
			FROM outbox.legal_holds ORDER BY set_at, hold_id`)
		if err != nil {
			return fmt.Errorf("list legal holds: %w", err)
		}
		defer rows.Close()
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tREASON\tSET BY\tSET AT\tRELEASED BY\tRELEASED AT")
		for rows.Next() {
			var id, reason, setBy, relBy string
			var setAt time.Time
			var relAt *time.Time
			if err := rows.Scan(&id, &reason, &setBy, &setAt, &relBy, &relAt); err != nil {
				return err
			}
			rel := "active"
			if relAt != nil {
				rel = relAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", id, strconv.Quote(reason), setBy, setAt.UTC().Format(time.RFC3339), relBy, rel)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return tw.Flush()
	case args[0] == "set" && len(args) == 3, args[0] == "release" && len(args) == 2:
		conn, err := connectAs(ctx, dsn, "outbox_retention")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		if args[0] == "set" {
			err = pgcall.SetLegalHold(ctx, conn, args[1], args[2])
		} else {
			err = pgcall.ReleaseLegalHold(ctx, conn, args[1])
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "legal hold %s: %s\n", args[0], args[1])
		return nil
	}
	return errUsage
}
