package dispatcher

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// R-DP-2, R-CO-5, R-AK-8: the dispatcher's HTTP transport against the real consumer kit (the
// four reference consumers, HMAC-authenticated, each on its own loopback server, receipts in
// their own database). Every event ends acknowledged and published. For one event the ack is
// lost after the consumer committed (the transport reports an error once): the delivery is
// retried, the consumer finds its receipt and answers the same one, the kernel accepts it, and
// the consumer's apply ran exactly once (no double effect).
func TestDispatcherWithConsumerKitOverHTTP(t *testing.T) {
	t.Parallel()
	db := dispatcherfix.Setup(t, "metering_input_processor")
	kb := consumerfix.Setup(t)
	secret := []byte(dispatcherfix.Secret)
	applied := map[string]*atomic.Int64{}
	trs := map[string]transport.Transport{}
	dests := map[string]config.Destination{}
	var mu sync.Mutex
	applies := map[string]int{} // event id → apply calls (metering)
	for _, spec := range reference.All() {
		spec := spec
		applied[spec.Destination] = &atomic.Int64{}
		kit := kb.Kit(t, spec.ConsumerName, func(c *consumer.Config) {
			c.HMACSecret = secret
			orig := c.Apply
			c.Apply = func(ctx context.Context, tx pgx.Tx, ev consumer.Event) (consumer.ReceiptFields, error) {
				applied[spec.Destination].Add(1)
				mu.Lock()
				applies[ev.EventID]++
				mu.Unlock()
				return orig(ctx, tx, ev)
			}
		})
		srv := httptest.NewServer(kit)
		t.Cleanup(srv.Close)
		h, err := transport.NewHTTP(transport.HTTPOptions{URL: srv.URL, Timeout: 10 * time.Second, Auth: config.AuthHMAC, Secret: config.NewSecret(secret)})
		if err != nil {
			t.Fatal(err)
		}
		trs[spec.Destination] = h
		dests[spec.Destination] = dispatcherfix.HTTPDest(srv.URL)
	}
	// Lose the first answer for the crash-window event: the consumer has committed, the
	// dispatcher never records the ack (as if it died before ack_delivery).
	var lossyEvent atomic.Value
	var lost atomic.Bool
	inner := trs["metering_input_processor"]
	trs["metering_input_processor"] = transport.Func(func(ctx context.Context, d wire.Delivery) (wire.Result, error) {
		res, err := inner.Deliver(ctx, d)
		if d.EventID == lossyEvent.Load() && lost.CompareAndSwap(false, true) {
			return wire.Result{}, errors.New("simulated: answer lost after the consumer committed")
		}
		return res, err
	})
	cfg := dispatcherfix.Config("dp-kit", dests)
	dispatcherfix.Start(t, db, cfg, trs)

	events := []struct{ typ, sv string }{
		{"run.created@2.0", "2.0"},
		{"execution.attempt-eligibility.finalized@1", "1"},
		{"execution.run-finalization.closed@1", "1"},
		{"metering.settlement-input.current-changed@1", "1"},
	}
	crash := testfix.Envelope("execution.attempt-eligibility.finalized@1", "1", "agg-crash", 1)
	lossyEvent.Store(crash["eventId"].(string))
	ids := []string{testfix.Append(t, db.Admin, crash)}
	for _, e := range events {
		ids = append(ids, testfix.Append(t, db.Admin, testfix.Envelope(e.typ, e.sv, "agg-"+testfix.NewUUID()[:8], 1)))
	}
	dispatcherfix.Eventually(t, "every event published", func() bool {
		return db.Count(t, `SELECT count(*) FROM outbox.outbox_publications`) == len(ids)
	})
	if db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status <> 'acknowledged'`) != 0 {
		t.Fatal("a delivery is not acknowledged")
	}
	crashID := crash["eventId"].(string)
	got := db.Attempts(t, "metering_input_processor", crashID)
	if !lost.Load() || len(got) != 2 || got[0].Code != "transport_error" || got[1].Outcome != "acknowledged" {
		t.Fatalf("crash-window attempts %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if applies[crashID] != 1 {
		t.Fatalf("crash-window event applied %d times, want 1 (the second delivery must find the receipt)", applies[crashID])
	}
}
