package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// Controlled recovery of quarantined deliveries (SPEC R-AK-10): find them, preview a
// re-delivery, re-deliver the original event bound to a case, a reason and an idempotency key.
// There is no skip, no forced success and no payload edit; the kernel writes the audit row.
//
//	outboxctl quarantine list [--destination D] [--reason R] [--limit N] [--json]   (as outbox_auditor)
//	outboxctl quarantine preview D EVENT                                           (as outbox_operator, else outbox_auditor)
//	outboxctl quarantine redeliver D EVENT --case C --reason TEXT --key K [--yes]  (as outbox_operator)
//
// redeliver prints the preview and asks for confirmation on stdin unless --yes.

// quarantineStdin is where redeliver reads the confirmation (tests replace it).
var quarantineStdin io.Reader = os.Stdin

var errNotConfirmed = errors.New("quarantine redeliver: not confirmed, nothing changed")

func runQuarantine(ctx context.Context, dsn string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: quarantine list | preview D EVENT | redeliver D EVENT --case C --reason TEXT --key K [--yes]", errUsage)
	}
	switch args[0] {
	case "list":
		return runQuarantineList(ctx, dsn, args[1:], out)
	case "preview":
		return runQuarantinePreview(ctx, dsn, args[1:], out)
	case "redeliver":
		return runQuarantineRedeliver(ctx, dsn, args[1:], out)
	}
	return fmt.Errorf("%w: unknown quarantine command %q", errUsage, args[0])
}

// parseInterleaved parses flags that may come before, between or after the positional
// arguments (the flag package stops at the first positional one) and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func runQuarantineList(ctx context.Context, dsn string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("quarantine list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dest := fs.String("destination", "", "only this destination")
	reason := fs.String("reason", "", "only this quarantine reason code (e.g. consumer_rejected, retry_exhausted)")
	limit := fs.Int("limit", 100, "at most this many rows (1..10000)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	pos, err := parseInterleaved(fs, args)
	if err != nil || len(pos) != 0 || *limit < 1 || *limit > 10000 {
		return fmt.Errorf("%w: quarantine list [--destination D] [--reason R] [--limit N] [--json]", errUsage)
	}
	conn, err := connectAs(ctx, dsn, "outbox_auditor")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var dp, rp *string
	if *dest != "" {
		dp = dest
	}
	if *reason != "" {
		rp = reason
	}
	rows, err := pgcall.OpenQuarantines(ctx, conn, dp, rp, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		type row struct {
			Destination    string     `json:"destination"`
			EventID        string     `json:"eventId"`
			EventType      string     `json:"eventType"`
			SchemaVersion  string     `json:"eventSchemaVersion"`
			ConsumerName   string     `json:"consumerName"`
			Reason         string     `json:"reason"`
			LastErrorCode  *string    `json:"lastErrorCode,omitempty"`
			AttemptCount   int        `json:"attemptCount"`
			QuarantinedAt  time.Time  `json:"quarantinedAt"`
			AcknowledgedAt *time.Time `json:"acknowledgedAt,omitempty"`
			CaseID         *string    `json:"caseId,omitempty"`
			Recoveries     int        `json:"recoveries"`
		}
		doc := []row{}
		for _, q := range rows {
			doc = append(doc, row{q.Destination, q.EventID, q.EventType, q.SchemaVersion, q.ConsumerName, q.Reason,
				q.LastErrorCode, q.AttemptCount, q.QuarantinedAt, q.AcknowledgedAt, q.CaseID, q.Recoveries})
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	if len(rows) == 0 {
		fmt.Fprintln(out, "No quarantined deliveries.")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUARANTINED AT\tDESTINATION\tEVENT ID\tEVENT TYPE\tSCHEMA\tREASON\tLAST ERROR\tATTEMPTS\tCASE\tRECOVERIES")
	for _, q := range rows {
		last, caseID := "-", "-"
		if q.LastErrorCode != nil {
			last = *q.LastErrorCode
		}
		if q.CaseID != nil {
			caseID = *q.CaseID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\n", q.QuarantinedAt.UTC().Format(time.RFC3339), q.Destination,
			q.EventID, q.EventType, q.SchemaVersion, q.Reason, last, q.AttemptCount, caseID, q.Recoveries)
	}
	return tw.Flush()
}

// connectPreview connects as outbox_operator, or as outbox_auditor when the login user is not
// an operator (both may preview).
func connectPreview(ctx context.Context, dsn string) (*pgx.Conn, error) {
	conn, err := connectAs(ctx, dsn, "outbox_operator")
	if err == nil {
		return conn, nil
	}
	if conn2, err2 := connectAs(ctx, dsn, "outbox_auditor"); err2 == nil {
		return conn2, nil
	}
	return nil, err
}

func runQuarantinePreview(ctx context.Context, dsn string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("quarantine preview", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pos, err := parseInterleaved(fs, args)
	if err != nil || len(pos) != 2 {
		return fmt.Errorf("%w: quarantine preview DESTINATION EVENT_ID", errUsage)
	}
	conn, err := connectPreview(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	p, err := pgcall.PreviewRedelivery(ctx, conn, pos[0], pos[1])
	if err != nil {
		return err
	}
	printPreview(out, p)
	return nil
}

func printPreview(out io.Writer, p pgcall.RedeliveryPreview) {
	reason, at := "-", "-"
	if p.QuarantineReason != nil {
		reason = *p.QuarantineReason
	}
	if p.QuarantinedAt != nil {
		at = p.QuarantinedAt.UTC().Format(time.RFC3339)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "delivery\t%s/%s\n", p.Destination, p.EventID)
	fmt.Fprintf(tw, "event type\t%s\n", p.EventType)
	fmt.Fprintf(tw, "consumer\t%s\n", p.ConsumerName)
	fmt.Fprintf(tw, "status\t%s\n", p.Status)
	fmt.Fprintf(tw, "attempts so far\t%d\n", p.AttemptCount)
	fmt.Fprintf(tw, "quarantine reason\t%s\n", reason)
	fmt.Fprintf(tw, "quarantined at\t%s\n", at)
	fmt.Fprintf(tw, "event published\t%s\n", strconv.FormatBool(p.Published))
	_ = tw.Flush()
	fmt.Fprintf(out, "would change: %s\n", p.WouldChange)
}

func runQuarantineRedeliver(ctx context.Context, dsn string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("quarantine redeliver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	caseID := fs.String("case", "", "the case (incident/ticket) this recovery belongs to (a literal)")
	reason := fs.String("reason", "", "why re-delivering is right now: what was fixed (free text, no payload, at most 500 characters)")
	key := fs.String("key", "", "idempotency key of this request (a literal); repeat it to repeat the request safely")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	pos, err := parseInterleaved(fs, args)
	if err != nil || len(pos) != 2 || *caseID == "" || strings.TrimSpace(*reason) == "" || *key == "" {
		return fmt.Errorf("%w: quarantine redeliver DESTINATION EVENT_ID --case C --reason TEXT --key K [--yes]", errUsage)
	}
	conn, err := connectAs(ctx, dsn, "outbox_operator")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	p, err := pgcall.PreviewRedelivery(ctx, conn, pos[0], pos[1])
	if err != nil {
		return err
	}
	printPreview(out, p)
	if p.Status != "quarantined" {
		fmt.Fprintln(out, "note: the delivery is not quarantined; the kernel answers only a repeat of an earlier request with the same key (its first result) and refuses anything else (OB602)")
	}
	fmt.Fprintf(out, "case: %s\nreason: %s\nidempotency key: %s\n", *caseID, *reason, *key)
	if !*yes {
		fmt.Fprint(out, "Re-deliver the original event? Type yes to confirm: ")
		line, _ := bufio.NewReader(quarantineStdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "yes" && a != "y" {
			fmt.Fprintln(out)
			return errNotConfirmed
		}
	}
	r, err := pgcall.RedeliverQuarantined(ctx, conn, pgcall.RedeliverParams{Destination: pos[0], EventID: pos[1],
		CaseID: *caseID, Reason: *reason, IdempotencyKey: *key})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "re-delivered: recovery %s; delivery %s/%s is %s (due now)\n", r.RecoveryID, pos[0], pos[1], r.Status)
	fmt.Fprintf(out, "watch: outboxctl status -destination %s; outboxctl quarantine list --destination %s; metric pgoutbox_redeliveries_total\n", pos[0], pos[0])
	return nil
}
