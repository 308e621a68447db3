package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// R-RT-1, R-RT-3: outboxctl archive run / verify / holds drive the retention functions as
// outbox_retention and read as outbox_auditor; outboxctl bootstrap runs until the legacy source
// is handled (R-BS-4).
func TestArchiveAndBootstrapCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.URL(t)
	admin := testdb.Conn(t, dsn, "")
	q := testfix.ActivateReference(t, admin)
	held := testfix.Append(t, admin, testfix.Envelope(statusEventType, "1", "agg-ctl", 1))
	delivered := testfix.Append(t, admin, testfix.Envelope(statusEventType, "1", "agg-ctl", 2))
	disp := testdb.Conn(t, dsn, "outbox_dispatcher")
	cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "ctl", Destinations: []string{"metering_input_processor"}, BatchSize: 2, Lease: time.Minute})
	if err != nil || len(cs) != 2 {
		t.Fatalf("claim: %v %d", err, len(cs))
	}
	for _, c := range cs {
		a, r := meteringAck(t, c)
		if _, err := pgcall.AckDelivery(ctx, disp, pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}, a, r); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	must := func(args ...string) string {
		t.Helper()
		out.Reset()
		if err := run(ctx, dsn, args, &out); err != nil {
			t.Fatalf("outboxctl %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	must("archive", "holds", "set", held, "audit request A-7")
	if s := must("archive", "holds", "list"); !strings.Contains(s, held) || !strings.Contains(s, "active") {
		t.Fatalf("holds list:\n%s", s)
	}
	s := must("archive", "run", "-older-than", "0s", "-max-rows", "10", "-batches", "3")
	if !strings.Contains(s, "archived 1 skipped 1") {
		t.Fatalf("archive run:\n%s", s)
	}
	runID := strings.Fields(s)[1]
	if s := must("archive", "verify", runID); !strings.Contains(s, "verified") {
		t.Fatalf("verify:\n%s", s)
	}
	must("archive", "holds", "release", held)
	if n := countRows(t, admin, `SELECT count(*) FROM outbox.archived_events WHERE event_id = $1::uuid`, delivered); n != 1 {
		t.Fatal("delivered event not archived")
	}

	// bootstrap: a legacy view, two runs of one row
	for _, stmt := range []string{
		`CREATE TABLE public.legacy_ctl AS SELECT gen_random_uuid() AS event_id, 'execution.attempt-eligibility.finalized@1'::text AS event_type,
			'1'::text AS event_schema_version, 'agg-legacy'::text AS aggregate_id, g::bigint AS aggregate_revision,
			'organization'::text AS tenant_kind, 't'::text AS tenant_id, 'w'::text AS workspace_id, NULL::text AS project_id,
			NULL::text AS correlation_id, NULL::text AS causation_id, NULL::text AS operation_id, jsonb_build_object('n', g) AS payload,
			now() AS occurred_at, now() AS created_at FROM generate_series(1, 2) g`,
		`GRANT SELECT ON public.legacy_ctl TO outbox_owner`,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	s = must("bootstrap", "public.legacy_ctl", itoa(q.DeliverySetVersion), itoa(q.DefinitionSchemaVersion), q.DigestAlgorithmVersion, q.DefinitionDigest, "-max-rows", "1")
	if strings.Count(s, "\n") != 2 || !strings.Contains(s, "rows_left 0") {
		t.Fatalf("bootstrap:\n%s", s)
	}
}

func countRows(t *testing.T, db pgcall.DBTX, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func itoa(i int) string { return strconv.Itoa(i) }
