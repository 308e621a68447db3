package mailbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// mbxOrderConsumer is the consumer of the mailbox destination: per key it tracks the highest
// revision it applied and records every delivery that arrives ahead of its predecessor (a
// per-key order violation). Every third first attempt answers retryable (forcing retries).
type mbxOrderConsumer struct {
	mu         sync.Mutex
	applied    map[string]int64 // key → highest applied revision
	violations []string
	calls      map[string]int // event id → calls
	delivered  int
}

func (c *mbxOrderConsumer) Deliver(_ context.Context, d wire.Delivery) (wire.Result, error) {
	var env struct {
		AggregateID       string `json:"aggregateId"`
		AggregateRevision int64  `json:"aggregateRevision"`
	}
	if err := json.Unmarshal(d.Envelope, &env); err != nil {
		return wire.Result{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[d.EventID]++
	last := c.applied[env.AggregateID]
	if env.AggregateRevision > last+1 {
		c.violations = append(c.violations, fmt.Sprintf("%s rev %d delivered after rev %d", env.AggregateID, env.AggregateRevision, last))
	}
	if c.calls[d.EventID] == 1 && env.AggregateRevision%3 == 0 {
		return wire.Result{Status: wire.Retryable, Code: "consumer_unavailable"}, nil
	}
	ack, rc, err := dispatcherfix.Answer(d)
	if err != nil {
		return wire.Result{}, err
	}
	if env.AggregateRevision == last+1 {
		c.applied[env.AggregateID] = env.AggregateRevision
		c.delivered++
	}
	return wire.Result{Status: wire.Acknowledged, Ack: ack, Receipt: rc}, nil
}

// R-MX-10, R-CL-7 (seed INV-10, CLM-7 "out-of-order per-key delivery prevented end to end"):
// the other system commits mailbox rows out of order (a smaller id after larger ones); the pump
// processes them in id order and emits one event per message with aggregate = key and revision =
// the key's processing sequence; the real dispatcher delivers them to the per_aggregate
// destination with injected retryable failures and a dispatcher restart in the middle. Every key
// is delivered exactly in revision order (never a revision ahead of its predecessor), every
// event is acknowledged and published, and the processing rows stay SUCCEEDED.
func TestMailboxPerKeyOrderEndToEnd(t *testing.T) {
	t.Parallel()
	b := mbxSetup(t, mbxOpts{})
	b.activate()
	ctx := context.Background()
	db := &dispatcherfix.DB{Dsn: b.ourDSN, Admin: b.admin}
	dispatcherfix.FastRetry(t, b.admin, reference.MailboxDestination, 50)

	keys := []string{"flight-a", "flight-b", "flight-c"}
	const n = 30
	// Ids 1..n, keys round-robin; id 5 and id 17 commit late (after the rows above them).
	late := map[int64]bool{5: true, 17: true}
	var open []interface{ Commit(context.Context) error }
	for i := int64(1); i <= n; i++ {
		msg := mbxMsg(keys[int(i)%len(keys)], "t.a", i)
		if late[i] {
			open = append(open, b.openWrite(i, msg))
		} else {
			b.write(i, msg)
		}
	}
	p, _, _ := b.pump(nil)
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	mbxTick(t, p) // 1..4 processed; W stops at the hole 5
	for _, tx := range open {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dispatcherfix.Eventually(t, "all processed", func() bool {
		mbxTick(t, p)
		return b.int(b.admin, `SELECT count(*) FROM mailbox.messages WHERE state = 'succeeded'`) == n
	})
	// Per key, revisions follow msg_id order.
	if v := b.int(b.admin, `SELECT count(*) FROM (SELECT key, revision, row_number() OVER (PARTITION BY key ORDER BY msg_id) AS rn
		FROM refmailbox.ref_effects) x WHERE revision <> rn`); v != 0 {
		t.Fatalf("%d revisions out of msg_id order", v)
	}

	c := &mbxOrderConsumer{applied: map[string]int64{}, calls: map[string]int{}}
	trs := map[string]transport.Transport{reference.MailboxDestination: transport.NewInProcess(map[string]wire.Consumer{reference.MailboxDestination: c})}
	dests := map[string]config.Destination{reference.MailboxDestination: {Transport: config.TransportInProcess, Auth: config.AuthNone}}
	r1 := dispatcherfix.Start(t, db, dispatcherfix.Config("mbx-e2e-1", dests), trs)
	dispatcherfix.Eventually(t, "a third delivered", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.delivered >= n/3 || len(c.violations) > 0
	})
	if err := r1.Stop(t); err != nil {
		t.Fatalf("first dispatcher drain: %v", err)
	}
	dispatcherfix.Start(t, db, dispatcherfix.Config("mbx-e2e-2", dests), trs)
	dispatcherfix.Eventually(t, "all delivered", func() bool {
		return b.int(b.admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = $1 AND status = 'acknowledged'`, reference.MailboxDestination) == n
	})
	c.mu.Lock()
	viol := append([]string(nil), c.violations...)
	applied := map[string]int64{}
	for k, v := range c.applied {
		applied[k] = v
	}
	c.mu.Unlock()
	if len(viol) > 0 {
		t.Fatalf("per-key order violated: %v", viol)
	}
	for _, k := range keys {
		if applied[k] != n/int64(len(keys)) {
			t.Fatalf("key %s applied up to %d, want %d", k, applied[k], n/int64(len(keys)))
		}
	}
	if v := b.int(b.admin, `SELECT count(*) FROM outbox.outbox_publications`); v != n {
		t.Fatalf("%d published, want %d", v, n)
	}
	if v := b.int(b.admin, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE outcome = 'retryable'`); v == 0 {
		t.Fatal("no retry happened: the test did not exercise retries")
	}
	if v := b.int(b.admin, `SELECT count(*) FROM mailbox.messages WHERE state <> 'succeeded'`); v != 0 {
		t.Fatal("a processing row changed after delivery")
	}
}
