package mailbox

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// R-MX-2, R-MX-1 (seed INV-2 "repeated scans, interrupted enqueue"): scanning the same rows again
// enqueues nothing new; an enqueue whose transaction is rolled back leaves neither rows nor a
// moved watermark, and the next scan enqueues everything exactly once (no duplicate, no loss).
func TestMailboxRepeatedScansAndInterruptedEnqueue(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	ctx := context.Background()
	for i := int64(1); i <= 5; i++ {
		b.write(i, mbxMsg("k", "t.a", i))
	}
	// Interrupted: the enqueue runs, then its transaction never commits.
	tx, err := b.api.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := b.discover(tx, b.rows(0)); r.Watermark != 5 || r.Enqueued != 5 {
		t.Fatalf("inside the interrupted transaction: %+v", r)
	}
	_ = tx.Rollback(ctx)
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.messages`); n != 0 || b.status().Watermark != 0 {
		t.Fatalf("after rollback: %d rows, W=%d; want nothing", n, b.status().Watermark)
	}
	r := b.discover(b.api, b.rows(0))
	if r.Watermark != 5 || r.Enqueued != 5 || r.OpenHoles != 0 {
		t.Fatalf("first scan %+v", r)
	}
	// Repeated scans of the same rows (and of rows below W): nothing new.
	for i := 0; i < 2; i++ {
		r = b.discover(b.api, b.rows(0))
		if r.Watermark != 5 || r.Enqueued != 0 {
			t.Fatalf("rescan %d: %+v", i, r)
		}
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.messages`); n != 5 {
		t.Fatalf("%d processing rows, want 5 (one per message, R-MX-9)", n)
	}
}

// R-MX-2 (seed INV-2 "watermark and enqueue in one transaction"): the pump's session is killed
// (pg_terminate_backend) after record_discovery ran but before its transaction committed: no
// processing row and no watermark move survive; a new pump session enqueues exactly once.
func TestMailboxWatermarkAndEnqueueOneTransaction(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	ctx := context.Background()
	b.write(1, mbxMsg("k", "t.a", 1))
	b.write(2, mbxMsg("k", "t.a", 2))
	victim := testdb.Conn(t, b.ourDSN, mbxPumpRole)
	var pid int
	if err := victim.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcall.AcquirePump(ctx, victim, mbxSource); err != nil {
		t.Fatal(err)
	}
	tx, err := victim.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := b.discover(tx, b.rows(0)); r.Watermark != 2 {
		t.Fatalf("in flight: %+v", r)
	}
	// Killed between read-and-record and commit.
	if _, err := b.admin.Exec(ctx, `SELECT pg_terminate_backend($1, 5000)`, pid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("commit on a terminated session succeeded")
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.messages`); n != 0 || b.status().Watermark != 0 {
		t.Fatalf("after the kill: %d rows, W=%d; want none and 0", n, b.status().Watermark)
	}
	// The dead session's hold is free (pid + backend_start no longer live): a new pump proceeds.
	p, _, _ := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatalf("acquire after the holder died: %v", err)
	}
	if _, err := p.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	if s := b.status(); s.Watermark != 2 || s.LagIDs != 2 {
		t.Fatalf("after restart: %+v", s)
	}
}

// R-MX-2 (seed INV-2 "hole aging and reset"): with real transactions of the other system
// committing out of order, a missing id stops W and opens a hole (rows above it are enqueued
// and wait); within hole_release_after W does not move; a hole filled before release is
// enqueued normally; when an old hole is filled, a newer hole keeps its full window (its
// first-seen time is not reset or shortened); an expired hole is released, W skipping exactly
// the hole ids and never an existing row.
func TestMailboxHoleAgingAndReset(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{holeReleaseAfter: time.Minute})
	ctx := context.Background()
	p, pc, _ := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.write(1, mbxMsg("k", "t.a", 1))
	tx2 := b.openWrite(2, mbxMsg("k", "t.a", 2)) // id 2 commits late
	b.write(3, mbxMsg("k", "t.a", 3))
	if _, err := p.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	s := b.status()
	if s.Watermark != 1 || s.OpenHoles != 1 || s.LagIDs != 2 {
		t.Fatalf("hole at 2: %+v", s)
	}
	// Row 3 is enqueued above the hole but is not the head: the head is 1, then nothing.
	if st := b.states(); st[3] != "pending" {
		t.Fatalf("row 3 %q", st[3])
	}
	var hole1Seen time.Time
	if err := b.admin.QueryRow(ctx, `SELECT first_seen_at FROM mailbox.holes WHERE first_id = 2`).Scan(&hole1Seen); err != nil {
		t.Fatal(err)
	}
	// A second hole at 5 (4 and 6 committed), seen later.
	b.write(4, mbxMsg("k", "t.a", 4))
	tx5 := b.openWrite(5, mbxMsg("k", "t.a", 5))
	b.write(6, mbxMsg("k", "t.a", 6))
	if _, err := p.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	if s := b.status(); s.Watermark != 1 || s.OpenHoles != 2 {
		t.Fatalf("two holes: %+v", s)
	}
	var hole2Seen time.Time
	if err := b.admin.QueryRow(ctx, `SELECT first_seen_at FROM mailbox.holes WHERE first_id = 5`).Scan(&hole2Seen); err != nil {
		t.Fatal(err)
	}
	if !hole2Seen.After(hole1Seen) {
		t.Fatalf("hole 5 first seen %v not after hole 2 %v", hole2Seen, hole1Seen)
	}
	// Within the window nothing is released, however often we scan.
	for i := 0; i < 3; i++ {
		if _, err := p.Discover(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := b.status(); s.Watermark != 1 || s.ReleasedHoles != 0 {
		t.Fatalf("within the window: %+v", s)
	}
	// The old hole is filled (late commit of 2) before release: enqueued normally, W moves to 4
	// and stops at the newer hole, which keeps its own first-seen time (full window).
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	if s := b.status(); s.Watermark != 4 || s.OpenHoles != 1 || s.ReleasedHoles != 0 {
		t.Fatalf("after filling hole 2: %+v", s)
	}
	if st := b.states(); st[2] != "pending" {
		t.Fatalf("filled row 2 is %q, want pending", st[2])
	}
	var seenNow time.Time
	if err := b.admin.QueryRow(ctx, `SELECT first_seen_at FROM mailbox.holes WHERE first_id = 5 AND released_at IS NULL`).Scan(&seenNow); err != nil {
		t.Fatal(err)
	}
	if !seenNow.Equal(hole2Seen) {
		t.Fatalf("newer hole's first-seen moved from %v to %v", hole2Seen, seenNow)
	}
	// Older than hole_release_after (our clock): released; W skips exactly id 5 to 6.
	b.ageHoles(2 * time.Minute)
	r := b.discover(pc, nil) // the pump's own session (any other is refused, OB403)
	if r.Watermark != 6 || r.ReleasedHoles != 1 || r.OpenHoles != 0 {
		t.Fatalf("release: %+v", r)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.holes WHERE released_at IS NOT NULL AND first_id = 5 AND last_id = 5`); n != 1 {
		t.Fatal("released hole is not exactly id 5")
	}
	if st := b.states(); len(st) != 5 || st[5] != "" {
		t.Fatalf("processing rows %v: the release must skip only the hole id", st)
	}
	_ = tx5.Rollback(ctx)
}

// R-MX-2, R-MX-3 (seed INV-3 "a smaller id committed late after W passed"): id 2's transaction
// commits after its hole was released and W moved past it. The pump's rescan of released holes
// finds it; it is recorded as a late row - reported by pipeline_status and the late-rows gauge -
// and never becomes a head (never processed out of order silently).
func TestMailboxLateRowAfterRelease(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{holeReleaseAfter: time.Minute})
	b.activate()
	ctx := context.Background()
	p, pc, m := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.write(1, mbxMsg("a", "t.a", 1))
	tx2 := b.openWrite(2, mbxMsg("a", "t.a", 2))
	b.write(3, mbxMsg("a", "t.a", 3))
	mbxTick(t, p)
	b.ageHoles(2 * time.Minute)
	mbxTick(t, p)
	mbxTick(t, p)
	if s := b.status(); s.Watermark != 3 || s.ReleasedHoles != 1 || s.LateRows != 0 {
		t.Fatalf("after release: %+v", s)
	}
	if st := b.states(); st[1] != "succeeded" || st[3] != "succeeded" {
		t.Fatalf("rows 1 and 3 %v", st)
	}
	if err := tx2.Commit(ctx); err != nil { // the late commit
		t.Fatal(err)
	}
	mbxTick(t, p)
	s := b.status()
	if s.LateRows != 1 || b.states()[2] != "late" {
		t.Fatalf("late row not reported: %+v, states %v", s, b.states())
	}
	if h := b.claim(pc); h != nil {
		t.Fatalf("late row became a head: %+v", h)
	}
	if err := p.RefreshStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if v := gaugeValue(t, m.LateRows, mbxSource); v != 1 {
		t.Fatalf("late rows gauge %v", v)
	}
	// Rescanning again records nothing new; the mailbox row is never marked (not terminal).
	mbxTick(t, p)
	if s := b.status(); s.LateRows != 1 {
		t.Fatalf("rescan: %+v", s)
	}
	if n := b.int(b.box, `SELECT count(*) FROM legacy.mailbox WHERE msg_id = 2 AND processed_at IS NOT NULL`); n != 0 {
		t.Fatal("late row was marked processed")
	}
}

// R-MX-4, R-MX-3 (seed INV-4 "compatibility row above W"): a row registered above W (here: a
// compatibility entrance's row recorded while W waits at a hole) is not claimed while W is
// below it, even though it is the smallest unfinished id above the head; once W catches up it is
// claimed in order.
func TestMailboxCompatRowAboveWatermarkWaits(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{startAfter: 100})
	ctx := context.Background()
	// W = 100; the compat entrance registers 105 (ids 101..104 not yet visible).
	r := b.discover(b.api, []pgcall.MailboxRow{{MsgID: 105, Message: []byte(`{"compat":true}`)}})
	if r.Watermark != 100 || r.Enqueued != 1 || r.OpenHoles != 4 {
		t.Fatalf("compat row: %+v", r)
	}
	if h := b.claim(b.api); h != nil {
		t.Fatalf("claimed %d above W", h.MsgID)
	}
	// 101..104 arrive: W catches up to 105; the head is 101, and 105 comes last.
	var rows []pgcall.MailboxRow
	for i := int64(101); i <= 104; i++ {
		rows = append(rows, pgcall.MailboxRow{MsgID: i, Message: []byte(`{}`)})
	}
	if r := b.discover(b.api, rows); r.Watermark != 105 {
		t.Fatalf("catch up: %+v", r)
	}
	var order []int64
	for {
		h := b.claim(b.api)
		if h == nil {
			break
		}
		order = append(order, h.MsgID)
		if err := pgcall.CompleteHead(ctx, b.api, mbxSource, h.MsgID, h.LeaseToken, pgcall.HeadSucceeded, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(order) != 5 || order[0] != 101 || order[4] != 105 {
		t.Fatalf("claim order %v", order)
	}
	// An id at or below W that was never seen (below the start) is refused and changes nothing.
	_, err := pgcall.RecordDiscovery(ctx, b.api, mbxSource, []pgcall.MailboxRow{{MsgID: 50, Message: []byte(`{}`)}})
	kernelfix.WantState(t, err, "22023")
}

// R-MX-5, R-MX-1 (seed INV-5 "terminal-but-unmarked rows do not block discovery"): while the
// mailbox refuses every mark (backfill transient), finished rows stay owed and discovery keeps
// finding and processing new rows. Discovery never reads processed_at: a row the mailbox already
// shows as processed is discovered and processed like any other (the five facts are separate).
func TestMailboxUnmarkedTerminalDoesNotBlockDiscovery(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	b.activate()
	ctx := context.Background()
	// The other system's trigger makes every mark fail (a transient mailbox failure).
	if _, err := b.box.Exec(ctx, `CREATE FUNCTION legacy.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'mailbox busy' USING ERRCODE = '55P03'; END $$;
		CREATE TRIGGER refuse BEFORE UPDATE ON legacy.mailbox FOR EACH ROW EXECUTE FUNCTION legacy.refuse()`); err != nil {
		t.Fatal(err)
	}
	p, _, _ := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.write(1, mbxMsg("a", "t.a", 1))
	mbxTick(t, p)
	mbxTick(t, p)
	if st := b.states(); st[1] != "succeeded" {
		t.Fatalf("row 1 %v", st)
	}
	// Pre-marked by someone else: still discovered and processed.
	if _, err := b.box.Exec(ctx, `ALTER TABLE legacy.mailbox DISABLE TRIGGER refuse;
		INSERT INTO legacy.mailbox VALUES (2, NULL, '{"key":"a","type":"t.a","data":2}', now());
		ALTER TABLE legacy.mailbox ENABLE TRIGGER refuse`); err != nil {
		t.Fatal(err)
	}
	b.write(3, mbxMsg("a", "t.a", 3))
	mbxTick(t, p)
	mbxTick(t, p)
	st := b.states()
	if st[2] != "succeeded" || st[3] != "succeeded" {
		t.Fatalf("new rows behind unmarked terminal rows: %v", st)
	}
	s := b.status()
	if s.Watermark != 3 || s.OldestUnmarkedTerminalSeconds <= 0 {
		t.Fatalf("status %+v: rows 1 and 3 owe their mark", s)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.messages WHERE backfill_state = 'owed' AND backfill_outcome = 'transient'`); n < 1 {
		t.Fatal("no transient backfill recorded")
	}
}

// R-MX-2, R-MX-5 (bad input to record_discovery): each malformed document is refused with a
// stable SQLSTATE and changes nothing; a known id with another message is OB401 (also the same
// id twice in one call); the mark is never an input.
func TestMailboxDiscoveryBadInput(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	ctx := context.Background()
	b.discover(b.api, []pgcall.MailboxRow{{MsgID: 1, Message: []byte(`{"a":1}`)}})
	cases := []struct{ doc, state string }{
		{`{}`, "22023"},
		{`[1]`, "22023"},
		{`[{"msgId":"2","message":{}}]`, "22023"},
		{`[{"msgId":2.5,"message":{}}]`, "22023"},
		{`[{"msgId":-2,"message":{}}]`, "22023"},
		{`[{"msgId":99999999999999999999,"message":{}}]`, "22023"},
		{`[{"msgId":2}]`, "22023"},
		{`[{"msgId":2,"message":{},"processedAt":null}]`, "22023"},
		{`[{"msgId":2,"msgId":3,"message":{}}]`, "22023"},
		{`[{"msgId":2,"receivedAt":"yesterday","message":{}}]`, "22023"},
		{`[{"msgId":2,"receivedAt":"2026-13-45T00:00:00Z","message":{}}]`, "22023"},
		{`[{"msgId":1,"message":{"a":2}}]`, "OB401"},
		{`[{"msgId":2,"message":1},{"msgId":2,"message":2}]`, "OB401"},
	}
	for _, c := range cases {
		_, err := pgcall.RecordDiscoveryJSON(ctx, b.api, mbxSource, []byte(c.doc))
		if got := pgcall.SQLState(err); got != c.state {
			t.Errorf("%s: SQLSTATE %q (%v), want %s", c.doc, got, err, c.state)
		}
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.messages`); n != 1 || b.status().Watermark != 1 {
		t.Fatalf("bad input changed state: %d rows, W %d", n, b.status().Watermark)
	}
	_, err := pgcall.RecordDiscovery(ctx, b.api, "no-such-source", nil)
	kernelfix.WantState(t, err, "22023")
}

// R-MX-1, R-MX-5 (seed INV-1 "five facts, asserted at the interface"): landed / enqueued /
// processed / marked / delivered are separate facts. Enqueue (record_discovery) never reads the
// processed mark; the backfill functions never read delivery state; no kernel delivery function
// reads mailbox state; and the pump reads the mailbox without processed_at.
func TestMailboxFiveFactsIndependent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Conn(t, testdb.URL(t), "")
	src := func(schema, name string) string {
		var s string
		if err := admin.QueryRow(ctx, `SELECT string_agg(p.prosrc, ' ') FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname = $1 AND p.proname = $2`, schema, name).Scan(&s); err != nil {
			t.Fatalf("%s.%s: %v", schema, name, err)
		}
		return s
	}
	for _, c := range []struct{ schema, fn, mustNot string }{
		{"mailbox", "record_discovery", "processed_at"},
		{"mailbox", "record_discovery", "backfill"},
		{"mailbox", "claim_backfill", "outbox."},
		{"mailbox", "record_backfill", "outbox."},
		{"mailbox", "complete_head", "outbox_deliveries"},
	} {
		if s := src(c.schema, c.fn); strings.Contains(s, c.mustNot) {
			t.Errorf("%s.%s refers to %q", c.schema, c.fn, c.mustNot)
		}
	}
	var leaks []string
	rows, err := admin.Query(ctx, `SELECT n.nspname || '.' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname IN ('outbox', 'inbox') AND p.prosrc LIKE '%mailbox%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		leaks = append(leaks, s)
	}
	if len(leaks) > 0 {
		t.Errorf("delivery-side functions read mailbox state: %v", leaks)
	}
	// The pump's discovery statement selects no processed_at (mailbox/pump, R-MX-5).
	b, err := os.ReadFile("../../mailbox/pump/pump.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "SELECT msg_id, received_at") || strings.Contains(line, "SELECT t.msg_id") {
			if strings.Contains(line, "processed_at") {
				t.Errorf("discovery reads the mark: %s", strings.TrimSpace(line))
			}
		}
	}
}
