package mailbox

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
)

// mbxFinish claims and completes heads (as outbox_mailbox) until ids are terminal.
func (b *mbx) finishAll(n int) {
	b.t.Helper()
	for i := 0; i < n; i++ {
		h := b.claim(b.api)
		if h == nil {
			b.t.Fatalf("no head after %d", i)
		}
		if err := pgcall.CompleteHead(context.Background(), b.api, mbxSource, h.MsgID, h.LeaseToken, pgcall.HeadSucceeded, nil); err != nil {
			b.t.Fatal(err)
		}
	}
}

// R-MX-7, R-MX-8 (seed INV-7 "the four backfill outcomes", INV-8, CLM-4): written (empty →
// timestamp); already marked (success, the existing timestamp is not overwritten); mailbox row
// missing (abandoned at once, alert metric, never counted as marked: the archive refuses it
// until an operator resolves it); transient (retry until backfill_deadline from our enqueue
// time, then abandoned and no automatic retry). PENDING/FAILED rows are never marked and
// record_backfill refuses rows owing nothing (OB402).
func TestMailboxBackfillFourOutcomes(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{backfillDeadline: time.Hour})
	ctx := context.Background()
	for i := int64(1); i <= 5; i++ {
		b.write(i, mbxMsg("k", "t.a", i))
	}
	already := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := b.box.Exec(ctx, `UPDATE legacy.mailbox SET processed_at = $1 WHERE msg_id = 2`, already); err != nil {
		t.Fatal(err)
	}
	if _, err := b.box.Exec(ctx, `DELETE FROM legacy.mailbox WHERE msg_id = 3`); err != nil {
		t.Fatal(err)
	}
	// The mailbox refuses row 4 (a transient failure of that row).
	if _, err := b.box.Exec(ctx, `CREATE FUNCTION legacy.refuse4() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.msg_id = 4 THEN RAISE EXCEPTION 'row 4 locked' USING ERRCODE = '55P03'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse4 BEFORE UPDATE ON legacy.mailbox FOR EACH ROW EXECUTE FUNCTION legacy.refuse4()`); err != nil {
		t.Fatal(err)
	}
	rows := b.rows(0)
	rows = append(rows, pgcall.MailboxRow{MsgID: 3, Message: []byte(mbxMsg("k", "t.a", 3))})
	b.discover(b.api, rows)
	b.finishAll(4) // 1..4 succeeded; 5 stays pending

	// record_backfill refuses a row owing nothing (pending) and changes nothing.
	_, err := pgcall.RecordBackfill(ctx, b.api, mbxSource, 5, pgcall.BackfillWritten)
	kernelfix.WantState(t, err, "OB402")

	p, pc, m := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Backfill(ctx); err != nil {
		t.Fatal(err)
	}
	type row struct {
		state, outcome string
		reason         *string
	}
	get := func(id int64) row {
		var r row
		if err := b.admin.QueryRow(ctx, `SELECT backfill_state, coalesce(backfill_outcome, ''), abandon_reason FROM mailbox.messages WHERE msg_id = $1`, id).
			Scan(&r.state, &r.outcome, &r.reason); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := get(1); r.state != "done" || r.outcome != "written" {
		t.Fatalf("1: %+v", r)
	}
	if r := get(2); r.state != "done" || r.outcome != "already_marked" {
		t.Fatalf("2: %+v", r)
	}
	if r := get(3); r.state != "abandoned" || r.outcome != "missing" || *r.reason != "missing" {
		t.Fatalf("3: %+v", r)
	}
	if r := get(4); r.state != "owed" || r.outcome != "transient" {
		t.Fatalf("4 before the deadline: %+v", r)
	}
	var got2 time.Time
	if err := b.box.QueryRow(ctx, `SELECT processed_at FROM legacy.mailbox WHERE msg_id = 2`).Scan(&got2); err != nil {
		t.Fatal(err)
	}
	if !got2.Equal(already) {
		t.Fatalf("already-marked row overwritten: %v", got2)
	}
	if n := b.int(b.box, `SELECT count(*) FROM legacy.mailbox WHERE msg_id IN (4, 5) AND processed_at IS NOT NULL`); n != 0 {
		t.Fatal("a transient or pending row got a mark")
	}
	if v := counterValue(t, m.BackfillsAbandoned.WithLabelValues(mbxSource)); v != 1 {
		t.Fatalf("abandoned alert counter %v", v)
	}
	// An abandoned row is never counted as marked: archiving it is refused.
	if _, err := b.admin.Exec(ctx, `DELETE FROM mailbox.messages WHERE msg_id = 3`); pgcall.SQLState(err) != "OB202" {
		t.Fatalf("archive of an abandoned row: %v", err)
	}
	// Transient past the deadline (our enqueue time): abandoned, no more automatic retries.
	if _, err := b.admin.Exec(ctx, `ALTER TABLE mailbox.messages DISABLE TRIGGER tg_mailbox_messages__terminal_immutable;
		UPDATE mailbox.messages SET enqueued_at = enqueued_at - interval '2 hours', backfill_next_at = now() WHERE msg_id = 4;
		ALTER TABLE mailbox.messages ENABLE TRIGGER tg_mailbox_messages__terminal_immutable`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Backfill(ctx); err != nil {
		t.Fatal(err)
	}
	if r := get(4); r.state != "abandoned" || *r.reason != "deadline" {
		t.Fatalf("4 after the deadline: %+v", r)
	}
	if ids, err := pgcall.ClaimBackfill(ctx, pc, mbxSource, 100); err != nil || len(ids) != 0 {
		t.Fatalf("abandoned rows still claimed: %v %v", ids, err)
	}
	if s := b.status(); s.AbandonedBackfills != 2 {
		t.Fatalf("status %+v", s)
	}
	// The operator resolves (outboxctl mailbox resolve): audited, then archivable.
	err = pgcall.ResolveAbandoned(ctx, b.api, mbxSource, 1, "marked_manually", "n")
	kernelfix.WantState(t, err, "OB402")
	err = pgcall.ResolveAbandoned(ctx, b.api, mbxSource, 3, "not_needed", " ")
	kernelfix.WantState(t, err, "22023")
	if err := pgcall.ResolveAbandoned(ctx, b.api, mbxSource, 3, "not_needed", "mailbox row purged upstream, case 17"); err != nil {
		t.Fatal(err)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.backfill_resolutions WHERE msg_id = 3 AND resolution = 'not_needed' AND resolved_by <> ''`); n != 1 {
		t.Fatal("no audit row")
	}
	if _, err := b.admin.Exec(ctx, `DELETE FROM mailbox.messages WHERE msg_id = 3`); err != nil {
		t.Fatalf("archive after resolution: %v", err)
	}
	if s := b.status(); s.AbandonedBackfills != 1 {
		t.Fatalf("status after resolution %+v", s)
	}
}

// R-MX-8, R-MX-7 (seed INV-7 "NULL received_at"): the deadline branch is measured from our
// enqueue time only: a row with received_at NULL and a row whose remote received_at is years
// old both stay in retry (not abandoned early), and neither is marked before it is terminal.
func TestMailboxNullReceivedAtDeadlineFromEnqueue(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{backfillDeadline: time.Hour})
	ctx := context.Background()
	if _, err := b.box.Exec(ctx, `INSERT INTO legacy.mailbox VALUES (1, NULL, '{"key":"k","type":"t.a","data":1}', NULL),
		(2, '2001-01-01T00:00:00Z', '{"key":"k","type":"t.a","data":2}', NULL)`); err != nil {
		t.Fatal(err)
	}
	p, pc, _ := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	var rat *time.Time
	if err := b.admin.QueryRow(ctx, `SELECT received_at FROM mailbox.messages WHERE msg_id = 1`).Scan(&rat); err != nil || rat != nil {
		t.Fatalf("received_at of 1: %v %v", rat, err)
	}
	// Not terminal yet: the pump's backfill finds nothing, the mailbox stays unmarked.
	if n, err := p.Backfill(ctx); err != nil || n != 0 {
		t.Fatalf("backfill before terminal: %d %v", n, err)
	}
	for i := 0; i < 2; i++ {
		h := b.claim(pc)
		if err := pgcall.CompleteHead(ctx, pc, mbxSource, h.MsgID, h.LeaseToken, pgcall.HeadSucceeded, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int64{1, 2} {
		if res, err := pgcall.RecordBackfill(ctx, pc, mbxSource, id, pgcall.BackfillTransient); err != nil || res != pgcall.BackfillRetry {
			t.Fatalf("%d transient within the deadline: %s %v", id, res, err)
		}
	}
	if n := b.int(b.box, `SELECT count(*) FROM legacy.mailbox WHERE processed_at IS NOT NULL`); n != 0 {
		t.Fatal("marked early")
	}
}

func counterValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// R-MX-6, R-MX-8, R-MX-11 (bad input at every mailbox function): each malformed argument is
// refused with 22023 (or the documented OB code) and changes nothing.
func TestMailboxFunctionsBadInput(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	ctx := context.Background()
	b.discover(b.api, []pgcall.MailboxRow{{MsgID: 1, Message: []byte(`{}`)}})
	h := b.claim(b.api)
	reg := testdb.Conn(t, b.ourDSN, "outbox_registrar")
	before := b.int(b.admin, `SELECT count(*) FROM mailbox.messages m WHERE m.state = 'pending' AND m.attempt = 1`)
	cases := []struct {
		conn  *pgx.Conn
		sql   string
		state string
	}{
		{reg, `SELECT mailbox.register_source('Bad Name', '1 minute', '1 hour')`, "22023"},
		{reg, `SELECT mailbox.register_source('s2', '0 seconds', '1 hour')`, "22023"},
		{reg, `SELECT mailbox.register_source('s2', '1 minute', '1 hour', -1)`, "22023"},
		{reg, `SELECT mailbox.register_source('s2', '1 minute', '1 hour', 0, '1 second', '5 minutes', 0)`, "22023"},
		{reg, `SELECT mailbox.register_source('legacy-inbox', '2 hours', '1 hour')`, "22023"}, // other parameters
		{b.api, `SELECT * FROM mailbox.claim_head('legacy-inbox', 'Bad Worker', '1 minute')`, "22023"},
		{b.api, `SELECT * FROM mailbox.claim_head('legacy-inbox', 'w', '2 hours')`, "22023"},
		{b.api, `SELECT mailbox.complete_head('legacy-inbox', 1, '` + h.LeaseToken + `', 'done')`, "22023"},
		{b.api, `SELECT mailbox.complete_head('legacy-inbox', 1, '` + h.LeaseToken + `', 'dead')`, "22023"},
		{b.api, `SELECT mailbox.complete_head('legacy-inbox', 1, '` + h.LeaseToken + `', 'succeeded', 'why')`, "22023"},
		{b.api, `SELECT mailbox.complete_head('legacy-inbox', 1, gen_random_uuid(), 'succeeded')`, "OB001"},
		{b.api, `SELECT mailbox.complete_head('legacy-inbox', 99, gen_random_uuid(), 'succeeded')`, "OB402"},
		{b.api, `SELECT mailbox.fail_head('legacy-inbox', 1, '` + h.LeaseToken + `', 'made_up')`, "22023"},
		{b.api, `SELECT * FROM mailbox.claim_backfill('legacy-inbox', 0)`, "22023"},
		{b.api, `SELECT mailbox.record_backfill('legacy-inbox', 1, 'maybe')`, "22023"},
		{b.api, `SELECT mailbox.record_backfill('legacy-inbox', 1, 'written')`, "OB402"},
		{b.api, `SELECT mailbox.resolve_abandoned('legacy-inbox', 1, 'forgotten', 'n')`, "22023"},
		{b.api, `SELECT * FROM mailbox.released_holes('legacy-inbox', '-1 hour')`, "22023"},
		{b.api, `SELECT * FROM mailbox.pipeline_status('nope')`, "22023"},
		{b.api, `SELECT mailbox.acquire_pump('nope')`, "22023"},
		{b.api, `SELECT * FROM refmailbox.apply_reference_effect('legacy-inbox', 1, '` + h.LeaseToken + `', '', 'k', 't')`, "22023"},
		{b.api, `SELECT mailbox.register_source('s3', '1 minute', '1 hour')`, "42501"},      // not the registrar
		{reg, `SELECT * FROM mailbox.claim_head('legacy-inbox', 'w', '1 minute')`, "42501"}, // not the pump
	}
	for _, c := range cases {
		_, err := c.conn.Exec(ctx, c.sql)
		if got := pgcall.SQLState(err); got != c.state {
			t.Errorf("%s: SQLSTATE %q (%v), want %s", c.sql, got, err, c.state)
		}
	}
	if after := b.int(b.admin, `SELECT count(*) FROM mailbox.messages m WHERE m.state = 'pending' AND m.attempt = 1`); after != before {
		t.Fatal("bad input changed the head")
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.sources`); n != 1 {
		t.Fatalf("%d sources", n)
	}
}
