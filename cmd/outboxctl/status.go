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

// runStatus prints, per destination, the pending/leased/acknowledged/quarantined counts and the
// oldest undelivered age, then the latest quarantined deliveries with their reasons, from the
// read-only views outbox.delivery_status and outbox.quarantined_deliveries, as outbox_auditor.
// Read-only by design: there is no skip, force-success or payload edit (R-AK-10).
//
//	outboxctl status [-quarantined N] [-destination NAME] [-json]
func runStatus(ctx context.Context, dsn string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	limit := fs.Int("quarantined", 10, "how many of the latest quarantined deliveries to list (0 to skip)")
	dest := fs.String("destination", "", "only this destination")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: status: %v", errUsage, err)
	}
	if fs.NArg() != 0 || *limit < 0 || *limit > 10000 {
		return fmt.Errorf("%w: status takes only -quarantined N (0..10000), -destination NAME and -json", errUsage)
	}
	conn, err := connectAs(ctx, dsn, "outbox_auditor")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	all, err := pgcall.DeliveryStatus(ctx, conn)
	if err != nil {
		return err
	}
	var rows []pgcall.DestinationStatus
	for _, r := range all {
		if *dest == "" || r.Destination == *dest {
			rows = append(rows, r)
		}
	}
	if *dest != "" && len(rows) == 0 {
		return fmt.Errorf("status: destination %q is not registered", *dest)
	}
	var quarantined []pgcall.QuarantinedDelivery
	if *limit > 0 {
		var dp *string
		if *dest != "" {
			dp = dest
		}
		if quarantined, err = pgcall.QuarantinedDeliveries(ctx, conn, dp, *limit); err != nil {
			return err
		}
	}
	if *asJSON {
		return printStatusJSON(out, rows, quarantined)
	}
	return printStatusText(out, rows, quarantined, *limit)
}

func printStatusText(out io.Writer, rows []pgcall.DestinationStatus, q []pgcall.QuarantinedDelivery, limit int) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DESTINATION\tCONSUMER\tPENDING\tLEASED\tACKNOWLEDGED\tQUARANTINED\tOLDEST PENDING AGE\tOLDEST GAP AGE")
	for _, r := range rows {
		age := "-"
		if r.OldestPendingAt != nil {
			age = r.OldestPendingAge.Round(time.Second).String()
		}
		gap := "-"
		if r.OldestGapAge > 0 {
			gap = r.OldestGapAge.Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.Destination, r.ConsumerName, r.Pending, r.Leased,
			r.Acknowledged, r.Quarantined, age, gap)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if limit == 0 {
		return nil
	}
	fmt.Fprintln(out)
	if len(q) == 0 {
		fmt.Fprintln(out, "No quarantined deliveries.")
		return nil
	}
	fmt.Fprintf(out, "Latest quarantined deliveries (newest first, at most %d):\n", limit)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUARANTINED AT\tDESTINATION\tEVENT ID\tEVENT TYPE\tSCHEMA\tREASON\tLAST ERROR\tATTEMPTS\tCASE")
	for _, d := range q {
		last, caseID := "-", "-"
		if d.LastErrorCode != nil {
			last = *d.LastErrorCode
		}
		if d.CaseID != nil {
			caseID = *d.CaseID
		} else if d.AcknowledgedAt != nil {
			caseID = "(acknowledged)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.QuarantinedAt.UTC().Format(time.RFC3339),
			d.Destination, d.EventID, d.EventType, d.SchemaVersion, d.Reason, last, strconv.Itoa(d.AttemptCount), caseID)
	}
	return tw.Flush()
}

func printStatusJSON(out io.Writer, rows []pgcall.DestinationStatus, q []pgcall.QuarantinedDelivery) error {
	type dest struct {
		Destination             string     `json:"destination"`
		ConsumerName            string     `json:"consumerName"`
		Pending                 int64      `json:"pending"`
		Leased                  int64      `json:"leased"`
		Acknowledged            int64      `json:"acknowledged"`
		Quarantined             int64      `json:"quarantined"`
		OldestPendingAt         *time.Time `json:"oldestPendingAt,omitempty"`
		OldestPendingAgeSeconds float64    `json:"oldestPendingAgeSeconds"`
	}
	type quar struct {
		Destination    string     `json:"destination"`
		EventID        string     `json:"eventId"`
		EventType      string     `json:"eventType"`
		SchemaVersion  string     `json:"eventSchemaVersion"`
		Reason         string     `json:"reason"`
		LastErrorCode  *string    `json:"lastErrorCode,omitempty"`
		AttemptCount   int        `json:"attemptCount"`
		QuarantinedAt  time.Time  `json:"quarantinedAt"`
		AcknowledgedAt *time.Time `json:"acknowledgedAt,omitempty"`
		CaseID         *string    `json:"caseId,omitempty"`
	}
	doc := struct {
		Destinations []dest `json:"destinations"`
		Quarantined  []quar `json:"quarantined"`
	}{Destinations: []dest{}, Quarantined: []quar{}}
	for _, r := range rows {
		doc.Destinations = append(doc.Destinations, dest{r.Destination, r.ConsumerName, r.Pending, r.Leased,
			r.Acknowledged, r.Quarantined, r.OldestPendingAt, r.OldestPendingAge.Seconds()})
	}
	for _, d := range q {
		doc.Quarantined = append(doc.Quarantined, quar{d.Destination, d.EventID, d.EventType, d.SchemaVersion,
			d.Reason, d.LastErrorCode, d.AttemptCount, d.QuarantinedAt, d.AcknowledgedAt, d.CaseID})
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
