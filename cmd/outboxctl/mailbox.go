package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

const mailboxUsage = `outboxctl mailbox status SOURCE [-list N] [-json]      pipeline status (as outbox_auditor): watermark, lag,
                                                       holes, head, unmarked terminal rows, abandoned, dead letters
outboxctl mailbox resolve SOURCE MSG_ID marked_manually|not_needed NOTE
                                                       resolve an abandoned backfill (as outbox_mailbox; audited)`

// runMailbox dispatches the mailbox pipeline's operator commands (SPEC §10, R-MX-8, R-MX-12;
// docs/mailbox.md).
func runMailbox(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: mailbox needs a subcommand:\n%s", errUsage, mailboxUsage)
	}
	switch args[0] {
	case "status":
		return runMailboxStatus(ctx, dsn, args[1:], out)
	case "resolve":
		return runMailboxResolve(ctx, dsn, args[1:], out)
	}
	return fmt.Errorf("%w: unknown mailbox subcommand %q:\n%s", errUsage, args[0], mailboxUsage)
}

func runMailboxStatus(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: mailbox status SOURCE [-list N] [-json]", errUsage)
	}
	source := args[0]
	fs := flag.NewFlagSet("mailbox status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	limit := fs.Int("list", 20, "how many rows needing attention (abandoned, dead, late) to list")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 || *limit < 0 || *limit > 10000 {
		return fmt.Errorf("%w: mailbox status SOURCE [-list N (0..10000)] [-json]", errUsage)
	}
	conn, err := connectAs(ctx, dsn, "outbox_auditor")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := pgcall.GetPipelineStatus(ctx, conn, source)
	if err != nil {
		return err
	}
	var att []pgcall.MailboxAttention
	if *limit > 0 {
		if att, err = pgcall.ListMailboxAttention(ctx, conn, source, *limit); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"source": source, "status": st, "attention": att})
	}
	head, hstate := "-", "-"
	if st.HeadMsgID != nil {
		head, hstate = strconv.FormatInt(*st.HeadMsgID, 10), *st.HeadState
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "source\t%s\n", source)
	fmt.Fprintf(tw, "watermark\t%d\n", st.Watermark)
	fmt.Fprintf(tw, "lag\t%d unfinished, oldest %s\n", st.LagIDs, secs(st.LagSeconds))
	fmt.Fprintf(tw, "holes\t%d open ids, %d released ids, %d late rows\n", st.OpenHoles, st.ReleasedHoles, st.LateRows)
	fmt.Fprintf(tw, "head\t%s (%s)\n", head, hstate)
	fmt.Fprintf(tw, "oldest unmarked terminal\t%s\n", secs(st.OldestUnmarkedTerminalSeconds))
	fmt.Fprintf(tw, "abandoned backfills\t%d\n", st.AbandonedBackfills)
	fmt.Fprintf(tw, "dead letters\t%d\n", st.DeadLetters)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(att) > 0 {
		fmt.Fprintln(out, "\nneeds attention (resolve abandoned backfills with: outboxctl mailbox resolve SOURCE MSG_ID marked_manually|not_needed NOTE)")
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MSG_ID\tKIND\tREASON\tSINCE")
		for _, a := range att {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", a.MsgID, a.Kind, a.Reason, a.Since.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return nil
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}

func runMailboxResolve(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) != 4 {
		return fmt.Errorf("%w: mailbox resolve SOURCE MSG_ID marked_manually|not_needed NOTE", errUsage)
	}
	id, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return fmt.Errorf("%w: MSG_ID %q is not an integer", errUsage, args[1])
	}
	conn, err := connectAs(ctx, dsn, "outbox_mailbox")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := pgcall.ResolveAbandoned(ctx, conn, args[0], id, args[2], args[3]); err != nil {
		return err
	}
	fmt.Fprintf(out, "resolved %s/%d as %s\n", args[0], id, args[2])
	return nil
}
