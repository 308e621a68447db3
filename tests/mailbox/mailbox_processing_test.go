package mailbox

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	mailboxapi "github.com/oceanway/pgoutbox/mailbox"
	"github.com/oceanway/pgoutbox/mailbox/pump"
	"github.com/oceanway/pgoutbox/reference"
)

// flakyHandler fails (transiently) while fail is set, else delegates to the reference handler.
type flakyHandler struct {
	mu    sync.Mutex
	fail  map[int64]int // msg id → remaining failures
	inner mailboxapi.Handler
	calls []int64
}

func (h *flakyHandler) Handle(ctx context.Context, tx pgx.Tx, source string, head *mailboxapi.Head) (mailboxapi.Result, error) {
	h.mu.Lock()
	h.calls = append(h.calls, head.MsgID)
	n := h.fail[head.MsgID]
	if n > 0 {
		h.fail[head.MsgID] = n - 1
	}
	h.mu.Unlock()
	// The business effect is written before the failure: the rollback must undo it (R-MX-10).
	res, err := h.inner.Handle(ctx, tx, source, head)
	if n > 0 {
		return mailboxapi.Result{}, errors.New("downstream unavailable")
	}
	return res, err
}

// R-MX-3 (seed INV-3 "FAILED head with backoff while maintenance runs"): a failed head keeps the
// head: while its backoff runs no later message is processed, even as discovery and backfill
// keep working (later rows are discovered, finished rows are marked); the backoff grows
// least(cap, base·2^(attempt-1)); when it expires the same message is retried first and then
// the queue drains in id order. Maintenance never starves the head.
func TestMailboxFailedHeadBlocksWithBackoffWhileMaintenanceRuns(t *testing.T) {
	t.Parallel()
	// a backoff long enough that the checks "during the backoff" cannot outlast it on a loaded machine
	b := mbxSetup(t, mbxOpts{backoffBase: 2 * time.Second, backoffCap: 4 * time.Second, maxAttempts: 10})
	b.activate()
	ctx := context.Background()
	h := &flakyHandler{fail: map[int64]int{2: 2}, inner: mbxRefHandler(nil)}
	p, pc, _ := b.pump(h)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.write(1, mbxMsg("a", "t.a", 1))
	b.write(2, mbxMsg("a", "t.a", 2))
	b.write(3, mbxMsg("b", "t.a", 3))
	mbxTick(t, p) // 1 succeeds, 2 fails once (backoff), 3 waits
	st := b.states()
	if st[1] != "succeeded" || st[2] != "failed" || st[3] != "pending" {
		t.Fatalf("after first tick %v", st)
	}
	var avail1, avail2 time.Time
	if err := b.admin.QueryRow(ctx, `SELECT available_at FROM mailbox.messages WHERE msg_id = 2`).Scan(&avail1); err != nil {
		t.Fatal(err)
	}
	// Maintenance meanwhile: more rows discovered, row 1 marked; the head stays 2 (failed).
	b.write(4, mbxMsg("c", "t.a", 4))
	for i := 0; i < 3; i++ {
		mbxTick(t, p)
	}
	s := b.status()
	if s.HeadMsgID == nil || *s.HeadMsgID != 2 || *s.HeadState != "failed" || s.Watermark != 4 {
		t.Fatalf("status during backoff %+v", s)
	}
	if st := b.states(); st[3] != "pending" || st[4] != "pending" {
		t.Fatalf("a later message overtook the failed head: %v", st)
	}
	if n := b.int(b.box, `SELECT count(*) FROM legacy.mailbox WHERE msg_id = 1 AND processed_at IS NOT NULL`); n != 1 {
		t.Fatal("backfill did not run while the head was backing off")
	}
	if h := b.claim(pc); h != nil {
		t.Fatalf("claimed %d during the backoff", h.MsgID)
	}
	// No business effect survived the failed attempts.
	if n := b.int(b.admin, `SELECT count(*) FROM refmailbox.ref_effects WHERE msg_id = 2`); n != 0 {
		t.Fatal("a failed attempt left its business effect")
	}
	// Backoff expires (wait on state, bounded): 2 fails a second time with a longer backoff,
	// then succeeds; 3 and 4 follow.
	dispatcherfix.Eventually(t, "second attempt of 2", func() bool {
		mbxTick(t, p)
		return b.int(b.admin, `SELECT attempt FROM mailbox.messages WHERE msg_id = 2`) >= 2
	})
	if err := b.admin.QueryRow(ctx, `SELECT available_at FROM mailbox.messages WHERE msg_id = 2`).Scan(&avail2); err != nil {
		t.Fatal(err)
	}
	dispatcherfix.Eventually(t, "queue drained", func() bool {
		mbxTick(t, p)
		st := b.states()
		return st[2] == "succeeded" && st[3] == "succeeded" && st[4] == "succeeded"
	})
	h.mu.Lock()
	calls := append([]int64(nil), h.calls...)
	h.mu.Unlock()
	want := []int64{1, 2, 2, 2, 3, 4}
	if len(calls) != len(want) {
		t.Fatalf("handler calls %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("handler calls %v, want %v (FIFO, the failed head first)", calls, want)
		}
	}
	if a := b.int(b.admin, `SELECT attempt FROM mailbox.messages WHERE msg_id = 2`); a != 3 {
		t.Fatalf("attempts of 2: %d", a)
	}
	_ = avail1
	_ = avail2
}

// R-MX-3, R-MX-6, R-MX-10: fail_head backs off least(cap, base·2^(attempt-1)) and at max attempts
// makes the message DEAD with reason retry_exhausted (a kept, visible dead letter owing its
// backfill); a non-retryable code is DEAD at once; the next message then becomes the head (never a
// stuck pipeline). Stale tokens are OB001, outcomes for terminal rows OB402, unknown codes 22023.
func TestMailboxFailHeadBackoffAndDeadLetter(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{backoffBase: time.Second, backoffCap: 3 * time.Second, maxAttempts: 3})
	ctx := context.Background()
	b.discover(b.api, []pgcall.MailboxRow{{MsgID: 1, Message: []byte(`{}`)}, {MsgID: 2, Message: []byte(`{}`)}})
	delays := []float64{}
	for attempt := 1; attempt <= 3; attempt++ {
		h := b.claim(b.api)
		if h == nil || h.MsgID != 1 || h.Attempt != attempt {
			t.Fatalf("attempt %d: head %+v", attempt, h)
		}
		_, err := pgcall.FailHead(ctx, b.api, mbxSource, h.MsgID, "00000000-0000-4000-8000-000000000000", "consumer_unavailable")
		kernelfix.WantState(t, err, "OB001")
		_, err = pgcall.FailHead(ctx, b.api, mbxSource, h.MsgID, h.LeaseToken, "no_such_code")
		kernelfix.WantState(t, err, "22023")
		res, err := pgcall.FailHead(ctx, b.api, mbxSource, h.MsgID, h.LeaseToken, "consumer_unavailable")
		if err != nil {
			t.Fatal(err)
		}
		if attempt < 3 {
			if res != "failed" {
				t.Fatalf("attempt %d: %s", attempt, res)
			}
			var d float64
			if err := b.admin.QueryRow(ctx, `SELECT extract(epoch FROM available_at - clock_timestamp()) FROM mailbox.messages WHERE msg_id = 1`).Scan(&d); err != nil {
				t.Fatal(err)
			}
			delays = append(delays, d)
			if h2 := b.claim(b.api); h2 != nil {
				t.Fatalf("claimed %d during backoff", h2.MsgID)
			}
			if _, err := b.admin.Exec(ctx, `UPDATE mailbox.messages SET available_at = now() - interval '1 second' WHERE msg_id = 1`); err != nil {
				t.Fatal(err)
			}
		} else if res != "dead" {
			t.Fatalf("at max attempts: %s", res)
		}
	}
	if delays[0] < 0.8 || delays[0] > 1.01 || delays[1] < 1.8 || delays[1] > 2.01 {
		t.Fatalf("backoff delays %v, want ~1s then ~2s", delays)
	}
	var reason, bf string
	if err := b.admin.QueryRow(ctx, `SELECT dead_reason, backfill_state FROM mailbox.messages WHERE msg_id = 1`).Scan(&reason, &bf); err != nil {
		t.Fatal(err)
	}
	if reason != "retry_exhausted" || bf != "owed" {
		t.Fatalf("dead letter reason %q backfill %q", reason, bf)
	}
	// Next head; a non-retryable code is dead at once.
	h := b.claim(b.api)
	if h == nil || h.MsgID != 2 {
		t.Fatalf("next head %+v", h)
	}
	if res, err := pgcall.FailHead(ctx, b.api, mbxSource, 2, h.LeaseToken, "unsupported_schema"); err != nil || res != "dead" {
		t.Fatalf("non-retryable: %s %v", res, err)
	}
	err := pgcall.CompleteHead(ctx, b.api, mbxSource, 2, h.LeaseToken, pgcall.HeadSucceeded, nil)
	kernelfix.WantState(t, err, "OB402")
	if s := b.status(); s.DeadLetters != 2 || s.HeadMsgID != nil {
		t.Fatalf("status %+v", s)
	}
}

// R-MX-6, R-MX-7, R-MX-10 (seed INV-6 "a delivery failure leaves SUCCEEDED untouched"): the
// message's outbound event fails delivery (retried, then quarantined by the dispatcher's
// functions); the processing row stays SUCCEEDED and its mark is still written. Terminal states
// never revert: complete_head again is OB402, and even the owner's direct UPDATE is refused
// (OB202), as is overwriting an existing processed mark (the pump writes only empty → timestamp).
func TestMailboxDeliveryFailureLeavesSucceeded(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	b.activate()
	ctx := context.Background()
	p, pc, _ := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.write(1, mbxMsg("a", "t.a", 1))
	mbxTick(t, p)
	var ev string
	if err := b.admin.QueryRow(ctx, `SELECT event_id::text FROM outbox.outbox_events WHERE aggregate_id = 'a'`).Scan(&ev); err != nil {
		t.Fatal(err)
	}
	disp := testdb.Conn(t, b.ourDSN, "outbox_dispatcher")
	for i := 0; i < 2; i++ {
		cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: "w", Destinations: []string{reference.MailboxDestination}, BatchSize: 10, Lease: time.Minute})
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim delivery: %v %d", err, len(cs))
		}
		if i == 0 {
			if _, err := pgcall.RetryDelivery(ctx, disp, kernelfix.FenceOf(cs[0]), "consumer_unavailable", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := b.admin.Exec(ctx, `UPDATE outbox.outbox_deliveries SET available_at = now() WHERE event_id = $1::uuid`, ev); err != nil {
				t.Fatal(err)
			}
		} else if err := pgcall.QuarantineDelivery(ctx, disp, kernelfix.FenceOf(cs[0]), "consumer_rejected", "consumer_rejected", nil); err != nil {
			t.Fatal(err)
		}
	}
	mbxTick(t, p)
	var state, bf string
	if err := b.admin.QueryRow(ctx, `SELECT state, backfill_state FROM mailbox.messages WHERE msg_id = 1`).Scan(&state, &bf); err != nil {
		t.Fatal(err)
	}
	if state != "succeeded" || bf != "done" {
		t.Fatalf("after a failed delivery: %s / %s", state, bf)
	}
	if _, err := b.admin.Exec(ctx, `UPDATE mailbox.messages SET state = 'pending', finished_at = NULL, backfill_state = NULL WHERE msg_id = 1`); pgcall.SQLState(err) != "OB202" {
		t.Fatalf("owner's revert of a terminal state: %v", err)
	}
	err := pgcall.CompleteHead(ctx, pc, mbxSource, 1, "00000000-0000-4000-8000-000000000000", pgcall.HeadDead, strPtr("x"))
	kernelfix.WantState(t, err, "OB402")
	// The mark is never overwritten: a second mark attempt leaves the first timestamp.
	var t1, t2 time.Time
	if err := b.box.QueryRow(ctx, `SELECT processed_at FROM legacy.mailbox WHERE msg_id = 1`).Scan(&t1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	mbxTick(t, p)
	if err := b.box.QueryRow(ctx, `SELECT processed_at FROM legacy.mailbox WHERE msg_id = 1`).Scan(&t2); err != nil {
		t.Fatal(err)
	}
	if !t1.Equal(t2) {
		t.Fatal("processed mark was overwritten")
	}
}

func strPtr(s string) *string { return &s }

// R-MX-10, R-MX-6 (bad input): a malformed message (not an object, missing key, unknown member,
// a float that no canonical event can carry) and a message the handler rejects each end as a
// DEAD row with its reason - never a stuck pipeline: the messages after them are processed, the
// dead letters are kept, counted and marked processed in the mailbox.
func TestMailboxBadMessagesEndDead(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	b.activate()
	ctx := context.Background()
	reject := func(key, typ string, data json.RawMessage) string {
		if typ == "flight.forbidden" {
			return "type not accepted"
		}
		return ""
	}
	p, _, m := b.pump(mbxRefHandler(reject))
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.write(1, `"just a string"`)
	b.write(2, `{"type":"t.a","data":1}`)
	b.write(3, `{"key":"a","type":"t.a","data":1,"extra":true}`)
	b.write(4, `{"key":"a","type":"t.a","data":1.5}`)
	b.write(5, mbxMsg("a", "flight.forbidden", 1))
	b.write(6, `{"key":"a","type":"Not A Literal","data":1}`)
	b.write(7, mbxMsg("a", "t.a", "fine"))
	mbxTick(t, p)
	mbxTick(t, p)
	st := b.states()
	for id := int64(1); id <= 6; id++ {
		if st[id] != "dead" {
			t.Fatalf("message %d is %q, want dead (%v)", id, st[id], st)
		}
	}
	if st[7] != "succeeded" {
		t.Fatalf("message after the bad ones: %q", st[7])
	}
	var reason string
	if err := b.admin.QueryRow(ctx, `SELECT dead_reason FROM mailbox.messages WHERE msg_id = 5`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if reason != "rejected by handler: type not accepted" {
		t.Fatalf("reason %q", reason)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.messages WHERE state = 'dead' AND (dead_reason LIKE 'malformed message:%')`); n != 5 {
		t.Fatalf("%d malformed dead letters with reason, want 5", n)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM outbox.outbox_events`); n != 1 {
		t.Fatalf("%d events, want 1 (only the good message)", n)
	}
	if n := b.int(b.box, `SELECT count(*) FROM legacy.mailbox WHERE processed_at IS NOT NULL`); n != 7 {
		t.Fatalf("%d marked, want 7 (dead letters are terminal and marked)", n)
	}
	if err := p.RefreshStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if v := gaugeValue(t, m.DeadLetters, mbxSource); v != 6 {
		t.Fatalf("dead letters gauge %v", v)
	}
}

// R-MX-9 (seed INV-9 "the same identity twice, retry after failure, duplicate after archive"):
// one message is one processing row; one business identity binds one effective record and one
// event: the same content again under a new msg_id is a duplicate (succeeded, no second record,
// no second event); a retry of the same message after a failed attempt is applied (it is not
// mistaken for a duplicate); after the first message's processing row is archived (removed once
// its mark is done), a resend is still a duplicate.
func TestMailboxBusinessIdentityOnce(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{backoffBase: 10 * time.Millisecond, backoffCap: 10 * time.Millisecond})
	b.activate()
	ctx := context.Background()
	h := &flakyHandler{fail: map[int64]int{3: 1}, inner: mbxRefHandler(nil)}
	p, _, _ := b.pump(h)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.write(1, mbxMsg("a", "t.a", "x"))
	b.write(2, mbxMsg("a", "t.a", "x")) // same identity (content), new msg_id
	b.write(3, mbxMsg("a", "t.a", "y")) // fails once, then retried
	dispatcherfix.Eventually(t, "three processed", func() bool {
		mbxTick(t, p)
		st := b.states()
		return st[1] == "succeeded" && st[2] == "succeeded" && st[3] == "succeeded"
	})
	if n := b.int(b.admin, `SELECT count(*) FROM refmailbox.ref_effects`); n != 2 {
		t.Fatalf("%d effective records, want 2 (x once, y once)", n)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM outbox.outbox_events WHERE aggregate_id = 'a'`); n != 2 {
		t.Fatalf("%d events, want 2", n)
	}
	if r := b.int(b.admin, `SELECT revision FROM refmailbox.ref_effects WHERE msg_id = 3`); r != 2 {
		t.Fatalf("retried message revision %d, want 2 (applied on retry, not a duplicate)", r)
	}
	// Archive row 1 (its mark is done), then the content arrives again as 4.
	if _, err := b.admin.Exec(ctx, `DELETE FROM mailbox.messages WHERE msg_id = 1`); err != nil {
		t.Fatalf("archive a marked terminal row: %v", err)
	}
	b.write(4, mbxMsg("a", "t.a", "x"))
	mbxTick(t, p)
	if st := b.states(); st[4] != "succeeded" {
		t.Fatalf("resend after archive %v", st)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM refmailbox.ref_effects`); n != 2 {
		t.Fatalf("%d effective records after the resend, want 2", n)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM outbox.outbox_events`); n != 2 {
		t.Fatalf("%d events after the resend, want 2", n)
	}
}

// blockingHandler runs the reference handler, then waits (inside the open transaction) until
// released: the test kills the session at that point.
type blockingHandler struct {
	inner   mailboxapi.Handler
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *blockingHandler) Handle(ctx context.Context, tx pgx.Tx, source string, head *mailboxapi.Head) (mailboxapi.Result, error) {
	res, err := h.inner.Handle(ctx, tx, source, head)
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.reached)
		<-h.release
	}
	return res, err
}

// R-MX-10, R-MX-6, R-MX-8 (seed INV-8/INV-17 "PG commit failure"): the pump's session dies after
// the handler wrote its business effect and appended its event but before the transaction
// committed: the effect, the event, the terminal state and the backfill intent all vanish
// together (nothing half-done, no mark owed); after the lease expires a new pump takes the same
// message again (attempt 2) and it ends with exactly one effect and one event.
func TestMailboxHandlerTransactionAllOrNothing(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	b.activate()
	ctx := context.Background()
	b.write(1, mbxMsg("a", "t.a", 1))
	h := &blockingHandler{inner: mbxRefHandler(nil), reached: make(chan struct{}), release: make(chan struct{})}
	p, pc, _ := b.pump(h, func(c *pump.Config) { c.Lease = time.Second })
	var pid int
	if err := pc.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := p.ProcessHead(ctx); errc <- err }()
	<-h.reached // effect and event written, transaction open
	if _, err := b.admin.Exec(ctx, `SELECT pg_terminate_backend($1, 5000)`, pid); err != nil {
		t.Fatal(err)
	}
	close(h.release)
	if err := <-errc; err == nil {
		t.Fatal("processing on a killed session reported success")
	}
	var state string
	var attempt int
	var bf *string
	if err := b.admin.QueryRow(ctx, `SELECT state, attempt, backfill_state FROM mailbox.messages WHERE msg_id = 1`).Scan(&state, &attempt, &bf); err != nil {
		t.Fatal(err)
	}
	if state != "pending" || attempt != 1 || bf != nil {
		t.Fatalf("after the crash: %s attempt %d backfill %v", state, attempt, bf)
	}
	if n := b.int(b.admin, `SELECT (SELECT count(*) FROM refmailbox.ref_effects) + (SELECT count(*) FROM outbox.outbox_events)`); n != 0 {
		t.Fatalf("%d effects/events survived the rollback", n)
	}
	// A new pump: the dead session's hold is free; the message is due once its lease expired.
	p2, _, _ := b.pump(nil)
	if err := p2.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	dispatcherfix.Eventually(t, "reprocessed", func() bool {
		mbxTick(t, p2)
		return b.states()[1] == "succeeded"
	})
	if a := b.int(b.admin, `SELECT attempt FROM mailbox.messages WHERE msg_id = 1`); a != 2 {
		t.Fatalf("attempt %d, want 2", a)
	}
	if n := b.int(b.admin, `SELECT count(*) FROM outbox.outbox_events`); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	if n := b.int(b.box, `SELECT count(*) FROM legacy.mailbox WHERE processed_at IS NOT NULL`); n != 1 {
		t.Fatal("not marked after the durable success")
	}
}

// R-MX-2, R-MX-5 (seed PRE-7 broken): the other system rewrites a message the pump already
// enqueued above a hole. Discovery refuses it (OB401, nothing recorded, the stored message
// unchanged; the tick reports the error), but the rows already enqueued are still processed and
// marked: discovery trouble never stops processing.
func TestMailboxRewrittenMessageStopsOnlyDiscovery(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	b.activate()
	ctx := context.Background()
	p, _, _ := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.write(1, mbxMsg("a", "t.a", 1))
	tx2 := b.openWrite(2, mbxMsg("a", "t.a", 2))
	defer func() { _ = tx2.Rollback(ctx) }()
	b.write(3, mbxMsg("a", "t.a", 3))
	if _, err := p.Discover(ctx); err != nil { // 1 and 3 enqueued, W = 1 (hole 2)
		t.Fatal(err)
	}
	if _, err := b.box.Exec(ctx, `UPDATE legacy.mailbox SET message = '{"key":"a","type":"t.a","data":"changed"}' WHERE msg_id = 3`); err != nil {
		t.Fatal(err)
	}
	_, err := p.Tick(ctx)
	if !errors.Is(err, pgcall.ErrMailboxConflict) {
		t.Fatalf("tick: %v, want the OB401 conflict", err)
	}
	if st := b.states(); st[1] != "succeeded" || st[3] != "pending" {
		t.Fatalf("states %v: row 1 must be processed despite the failed discovery", st)
	}
	if n := b.int(b.box, `SELECT count(*) FROM legacy.mailbox WHERE msg_id = 1 AND processed_at IS NOT NULL`); n != 1 {
		t.Fatal("row 1 not marked")
	}
	if n := b.int(b.admin, `SELECT count(*) FROM mailbox.messages WHERE msg_id = 3 AND message->>'data' = '3'`); n != 1 {
		t.Fatal("the stored message changed")
	}
}
