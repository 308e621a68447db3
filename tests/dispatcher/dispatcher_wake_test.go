package dispatcher

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// R-SEC-5, issue 26 item 2: the wake-up channel cannot be driven by a login outside the kernel
// roles. A login with no kernel role floods NOTIFY outbox_delivery (thousands of
// notifications, from four connections) for a destination the dispatcher serves. Claims that
// a notification triggered and that found nothing back off (wake_coalesce doubled up to
// poll_interval), so the flood drives a small bounded number of claims - about
// log2(poll_interval / wake_coalesce) + one per poll_interval - instead of one per
// wake_coalesce; and a genuine append made during the flood is still delivered (its claim
// resets the back-off).
func TestWakeUpFloodFromOutsiderIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dispatcherfix.Setup(t)
	c := dispatcherfix.NewConsumer(func(int, wire.Delivery) dispatcherfix.Reply { return dispatcherfix.Reply{Kind: "ack"} })
	srv, h := dispatcherfix.HTTPConsumer(t, c, 5*time.Second)
	cfg := dispatcherfix.Config("wake-flood", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(srv.URL)})
	cfg.PollInterval = 400 * time.Millisecond
	cfg.WakeCoalesce = 25 * time.Millisecond
	r := dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: h})
	notifyClaims := func() float64 { return promtest.ToFloat64(r.M.ClaimCalls.WithLabelValues("notify")) }
	dispatcherfix.Eventually(t, "listening", func() bool { return notifyClaims() >= 1 }) // the wake-up after LISTEN

	// The outsider: a login that is a member of no role at all.
	outsider, outsiderDSN := kernelfix.Login(t, db.Admin, db.Dsn)
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ready := make(chan struct{}, 4)
	flood := func() {
		defer wg.Done()
		conn, err := pgx.Connect(ctx, outsiderDSN)
		if err != nil {
			t.Error(err)
			ready <- struct{}{}
			return
		}
		defer conn.Close(ctx)
		var who string
		if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&who); err != nil || who != outsider {
			t.Errorf("outsider connection is %q (%v)", who, err)
		}
		ready <- struct{}{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			// One statement per notification (autocommit): PostgreSQL folds identical
			// notifications of one transaction into one, so each must be its own transaction.
			if _, err := conn.Exec(ctx, `SELECT pg_notify('outbox_delivery', $1)`, dispatcherfix.MeteringDest); err != nil {
				t.Error(err)
				return
			}
			sent.Add(1)
		}
	}
	wg.Add(4)
	for i := 0; i < 4; i++ {
		go flood()
	}
	for i := 0; i < 4; i++ {
		<-ready // barrier: every flooding connection is open
	}
	base := notifyClaims()
	start := time.Now()
	for sent.Load() < 2000 { // a state to reach, not a timing assertion
		time.Sleep(20 * time.Millisecond)
	}
	// A genuine append in the middle of the flood is delivered.
	ev := db.AppendMetering(t)
	dispatcherfix.Eventually(t, "the genuine append acknowledged during the flood", func() bool {
		return db.Status(t, dispatcherfix.MeteringDest, ev) == "acknowledged"
	})
	// Keep flooding across several poll intervals (the flood's length, not an assertion): the
	// back-off must hold for a sustained flood, not only for a burst.
	for sent.Load() < 4000 || time.Since(start) < 4*cfg.PollInterval {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	got := notifyClaims() - base
	// Bound: each back-off ramp (25 ms doubling to 400 ms: 5 steps) plus one claim per
	// poll_interval, twice (the genuine append's claim restarts the ramp), plus slack of 2.
	ramp := math.Ceil(math.Log2(float64(cfg.PollInterval)/float64(cfg.WakeCoalesce))) + 1
	limit := 2*ramp + math.Ceil(float64(elapsed)/float64(cfg.PollInterval)) + 2
	coalesceOnly := float64(elapsed / cfg.WakeCoalesce)
	t.Logf("%d notifications from a non-kernel login in %v drove %.0f notify-triggered claims (bound %.0f; coalescing alone would allow %.0f)",
		sent.Load(), elapsed.Round(time.Millisecond), got, limit, coalesceOnly)
	if got > limit {
		t.Fatalf("%d notifications in %v drove %.0f notify-triggered claims; want at most %.0f", sent.Load(), elapsed, got, limit)
	}
	if got < 1 {
		t.Fatal("the flood drove no claim at all")
	}
	if n := c.CallsFor(ev); n != 1 {
		t.Fatalf("the genuine event was delivered %d times", n)
	}
}
