package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// SPEC R-AK-10: the operator's runbook commands. quarantine list shows the deliveries
// quarantined now (filters by destination and reason); preview shows what a re-delivery would
// do and changes nothing; redeliver prints the preview, asks for confirmation (anything but
// yes changes nothing), re-delivers with case, reason and key, and a repeat with --yes and the
// same key answers the first recovery. Run against a real database as the kernel roles.
func TestQuarantineCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	testfix.ActivateReference(t, admin)
	disp := testdb.Conn(t, dsn, "outbox_dispatcher")
	quarantine := func(reason string) string {
		ev := testfix.Append(t, admin, testfix.Envelope(statusEventType, "1", "agg-q-"+reason, 1))
		rows, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "q-test", Destinations: []string{"metering_input_processor"}, BatchSize: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 || rows[0].EventID != ev {
			t.Fatalf("claim: %v %d", err, len(rows))
		}
		c := rows[0]
		if err := pgcall.QuarantineDelivery(ctx, disp, pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}, reason, reason, nil); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	rejected := quarantine("consumer_rejected")
	invalid := quarantine("envelope_invalid")

	var out bytes.Buffer
	if err := run(ctx, dsn, []string{"quarantine", "list"}, &out); err != nil {
		t.Fatalf("list: %v", err)
	}
	if !strings.Contains(out.String(), rejected) || !strings.Contains(out.String(), invalid) || !strings.Contains(out.String(), "consumer_rejected") {
		t.Fatalf("list:\n%s", out.String())
	}
	out.Reset()
	if err := run(ctx, dsn, []string{"quarantine", "list", "--reason", "envelope_invalid", "--destination", "metering_input_processor", "--json"}, &out); err != nil {
		t.Fatalf("list --reason: %v", err)
	}
	var listed []map[string]any
	if err := json.Unmarshal(out.Bytes(), &listed); err != nil || len(listed) != 1 || listed[0]["eventId"] != invalid {
		t.Fatalf("list --reason envelope_invalid --json: %v\n%s", err, out.String())
	}

	out.Reset()
	if err := run(ctx, dsn, []string{"quarantine", "preview", "metering_input_processor", rejected}, &out); err != nil {
		t.Fatalf("preview: %v", err)
	}
	for _, want := range []string{"status             quarantined", "quarantine reason  consumer_rejected", "would change: re-deliver the original event", "as attempt 2"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("preview lacks %q:\n%s", want, out.String())
		}
	}

	args := []string{"quarantine", "redeliver", "metering_input_processor", rejected, "--case", "INC-7", "--reason", "consumer fixed", "--key", "inc-7-1"}
	for _, answer := range []string{"no\n", "", "later\n"} {
		quarantineStdin = strings.NewReader(answer)
		out.Reset()
		if err := run(ctx, dsn, args, &out); !errors.Is(err, errNotConfirmed) {
			t.Fatalf("answer %q: %v", answer, err)
		}
		if !strings.Contains(out.String(), "would change:") || !strings.Contains(out.String(), "Type yes to confirm") {
			t.Fatalf("no preview before the question:\n%s", out.String())
		}
	}
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM outbox.outbox_recoveries`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("unconfirmed redeliver wrote %d audit rows (%v)", n, err)
	}
	quarantineStdin = strings.NewReader("yes\n")
	out.Reset()
	if err := run(ctx, dsn, args, &out); err != nil {
		t.Fatalf("confirmed redeliver: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "re-delivered: recovery ") || !strings.Contains(out.String(), "is pending") {
		t.Fatalf("redeliver output:\n%s", out.String())
	}
	var status string
	if err := admin.QueryRow(ctx, `SELECT status FROM outbox.outbox_deliveries WHERE event_id = $1::uuid`, rejected).Scan(&status); err != nil || status != "pending" {
		t.Fatalf("status %q %v", status, err)
	}
	// The same request again (--yes): the first result; another request under the key: OB601.
	out.Reset()
	if err := run(ctx, dsn, append(args, "--yes"), &out); err != nil || !strings.Contains(out.String(), "is pending") {
		t.Fatalf("repeat: %v\n%s", err, out.String())
	}
	err := run(ctx, dsn, []string{"quarantine", "redeliver", "metering_input_processor", invalid, "--case", "INC-7", "--reason", "consumer fixed", "--key", "inc-7-1", "--yes"}, &out)
	if !errors.Is(err, pgcall.ErrRecoveryKeyConflict) {
		t.Fatalf("other request under a used key: %v", err)
	}
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM outbox.outbox_recoveries`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d audit rows (%v), want 1", n, err)
	}
	// list shows only what is quarantined now.
	out.Reset()
	if err := run(ctx, dsn, []string{"quarantine", "list"}, &out); err != nil || strings.Contains(out.String(), rejected) || !strings.Contains(out.String(), invalid) {
		t.Fatalf("list after recovery: %v\n%s", err, out.String())
	}
	for _, bad := range [][]string{
		{"quarantine"},
		{"quarantine", "redeliver", "metering_input_processor", invalid, "--case", "C", "--key", "k"},
		{"quarantine", "preview", "metering_input_processor"},
		{"quarantine", "list", "extra"},
	} {
		if err := run(ctx, dsn, bad, &out); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want usage error", bad, err)
		}
	}
}
