package readmodel

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// Issue 41 item 3, SQL side: outbox.console_search pages newest first with its keyset cursor
// (every event exactly once, never OFFSET), refuses bad input with 22023 (and changes nothing:
// it only reads), and is the auditor's only (dispatcher, operator, producer: 42501).
func TestConsoleSearchSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := cnSetup(t)
	want := []string{b.fresh, b.leased, b.quarantined, b.acked, b.retried}

	// keyset paging, two at a time, for an event kind and for the destination kind
	for _, kind := range []struct{ kind, value string }{{"eventType", kernelfix.Metering}, {"destination", kernelfix.DestMetering}} {
		var got []string
		p := pgcall.ConsoleSearchParams{Kind: kind.kind, Value: kind.value, Limit: 2}
		for page := 0; page < 5; page++ {
			hits, err := pgcall.ConsoleSearch(ctx, b.aud, p)
			if err != nil {
				t.Fatalf("%s page %d: %v", kind.kind, page, err)
			}
			for _, h := range hits {
				got = append(got, h.EventID)
			}
			if len(hits) < 2 {
				break
			}
			p.BeforeAt, p.BeforeID = hits[len(hits)-1].At, hits[len(hits)-1].CursorID
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s pages: %v, want %v", kind.kind, got, want)
		}
	}
	// errorCode: the attempt, its destination, the delivery's state now and the code
	hits, err := pgcall.ConsoleSearch(ctx, b.aud, pgcall.ConsoleSearchParams{Kind: "errorCode", Value: "consumer_unavailable", Limit: 10})
	if err != nil || len(hits) != 1 || hits[0].EventID != b.retried || *hits[0].Destination != kernelfix.DestMetering ||
		*hits[0].Status != "pending" || *hits[0].ErrorCode != "consumer_unavailable" || hits[0].CursorID == b.retried {
		t.Errorf("errorCode search: %+v, %v", hits, err)
	}
	// exact only: no prefix, no case folding
	for _, v := range []string{"att-cn", "ATT-CN-B", " att-cn-b"} {
		if hits, err := pgcall.ConsoleSearch(ctx, b.aud, pgcall.ConsoleSearchParams{Kind: "aggregateId", Value: v, Limit: 10}); err != nil || len(hits) != 0 {
			t.Errorf("aggregateId %q: %d hits, %v (exact match only)", v, len(hits), err)
		}
	}

	now := time.Now()
	later := now.Add(time.Hour)
	for _, c := range []struct {
		name string
		p    pgcall.ConsoleSearchParams
	}{
		{"unknown kind", pgcall.ConsoleSearchParams{Kind: "payload", Value: "x", Limit: 10}},
		{"empty value", pgcall.ConsoleSearchParams{Kind: "aggregateId", Value: "", Limit: 10}},
		{"value over 200 characters", pgcall.ConsoleSearchParams{Kind: "aggregateId", Value: strings.Repeat("a", 201), Limit: 10}},
		{"eventId not a UUID", pgcall.ConsoleSearchParams{Kind: "eventId", Value: "not-a-uuid", Limit: 10}},
		{"empty range", pgcall.ConsoleSearchParams{Kind: "eventType", Value: kernelfix.Metering, From: &later, To: &now, Limit: 10}},
		{"timeRange without bounds", pgcall.ConsoleSearchParams{Kind: "timeRange", Limit: 10}},
		{"timeRange with a value", pgcall.ConsoleSearchParams{Kind: "timeRange", Value: "x", From: &now, To: &later, Limit: 10}},
		{"limit 0", pgcall.ConsoleSearchParams{Kind: "eventType", Value: kernelfix.Metering, Limit: 0}},
		{"limit 501", pgcall.ConsoleSearchParams{Kind: "eventType", Value: kernelfix.Metering, Limit: 501}},
	} {
		if _, err := pgcall.ConsoleSearch(ctx, b.aud, c.p); pgcall.SQLState(err) != "22023" {
			t.Errorf("%s: %v, want 22023", c.name, err)
		}
	}
	// half a cursor (the wrapper always sends both halves, so call the SQL directly)
	if _, err := b.aud.Exec(ctx, `SELECT * FROM outbox.console_search('eventType', $1, NULL, NULL, now(), NULL, 10)`, kernelfix.Metering); pgcall.SQLState(err) != "22023" {
		t.Errorf("half a cursor: %v, want 22023", err)
	}
	for _, role := range []string{"outbox_dispatcher", "outbox_operator", "outbox_producer"} {
		c := testdb.Conn(t, b.Dsn, role)
		if _, err := pgcall.ConsoleSearch(ctx, c, pgcall.ConsoleSearchParams{Kind: "eventType", Value: kernelfix.Metering, Limit: 10}); pgcall.SQLState(err) != "42501" {
			t.Errorf("%s search: %v, want 42501", role, err)
		}
		if _, err := pgcall.ConsoleDestinations(ctx, c, 10); pgcall.SQLState(err) != "42501" {
			t.Errorf("%s destinations: %v, want 42501", role, err)
		}
	}
}

// Issue 41 item 2, SQL side: outbox.console_destinations gives every registered destination's
// backlog, oldest undelivered, open quarantine, open revision gaps and the claim pause with its
// reason and login (the pause written by pause_destination_claims on the operator session).
func TestConsoleDestinationsSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := cnSetup(t)
	testfix.Must(t, pgcall.PauseDestinationClaims(ctx, b.op, kernelfix.DestCoreOps, "INC-41 projector upgrade"))
	ds, err := pgcall.ConsoleDestinations(ctx, b.aud, 10000)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]pgcall.ConsoleDestination{}
	for _, d := range ds {
		by[d.Destination] = d
	}
	m := by[kernelfix.DestMetering]
	if m.Pending != 2 || m.Leased != 1 || m.QuarantinedOpen != 1 || m.OpenGaps != 0 || m.OldestPendingAt == nil || m.PausedReason != nil {
		t.Errorf("metering: %+v", m)
	}
	// the cap: with 1, two pending deliveries count as 2 ("more than 1") and a bad cap is 22023
	capped, err := pgcall.ConsoleDestinations(ctx, b.aud, 1)
	testfix.Must(t, err)
	for _, d := range capped {
		if d.Destination == kernelfix.DestMetering && (d.Pending != 2 || d.Leased != 1) {
			t.Errorf("capped metering: %+v", d)
		}
	}
	for _, bad := range []int{0, 1000001} {
		if _, err := pgcall.ConsoleDestinations(ctx, b.aud, bad); pgcall.SQLState(err) != "22023" {
			t.Errorf("cap %d: %v, want 22023", bad, err)
		}
	}
	var login string
	testfix.Must(t, b.op.QueryRow(ctx, `SELECT session_user`).Scan(&login))
	c := by[kernelfix.DestCoreOps]
	if c.PausedReason == nil || *c.PausedReason != "INC-41 projector upgrade" || c.PausedBy == nil || *c.PausedBy != login || c.Pending != 0 {
		t.Errorf("core operations: %+v", c)
	}
}
