package projection

// T-10, R-PV-2, R-PV-3 (issue 24 item 7): appends and acks keep running during the build, the
// freeze and the switch. A producer appends business runs (13 events, four destinations) and two
// delivery loops acknowledge them the whole time: one for core_operations through the reference
// operations projector (v1 online, then dual-applying to the shadow, then v2 keeping v1 current),
// one for the three other destinations. Each step of the protocol is a barrier: the test moves on
// only after appends and acknowledgements have committed again since the step began. The switch
// itself is held open in its transaction while the producer appends and the other destinations'
// acknowledgements commit (they are not blocked by it). At the end every event is published and
// both versions have one content digest (R-PV-4).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/consumerfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/projectionfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
	"github.com/oceanway/pgoutbox/wire"
)

// clLoad is the traffic that runs beside the protocol.
type clLoad struct {
	appended atomic.Int64 // events committed by the producer
	acked    atomic.Int64 // core_operations acknowledgements
	ackedOut atomic.Int64 // acknowledgements of the other three destinations
	open     atomic.Bool  // the producer appends only while open
	idle     atomic.Bool  // the producer is between runs with open = false
	core     atomic.Pointer[consumer.Consumer]
	errMu    sync.Mutex
	err      error
}

func (l *clLoad) fail(err error) {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

func (l *clLoad) failed() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// clServe claims the destinations' deliveries, hands each to its kit, acknowledges what the kit
// acknowledged and schedules a retry for the rest (an operation waiting for its run, a revision
// gap, a refused stale token); until stop.
func clServe(ctx context.Context, l *clLoad, disp pgcall.DBTX, worker string, dests []string,
	kitOf func(string) *consumer.Consumer, acked *atomic.Int64, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		cs, err := pgcall.ClaimDeliveries(ctx, disp, pgcall.ClaimParams{Worker: worker, Destinations: dests,
			BatchSize: 100, Lease: time.Minute})
		if err != nil {
			l.fail(fmt.Errorf("%s claim: %w", worker, err))
			return
		}
		if len(cs) == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		todo := cs
		codes := map[string]string{}
		for progress := true; progress && len(todo) > 0; {
			progress = false
			var left []pgcall.ClaimedDelivery
			for _, c := range todo {
				d, code := dispatcher.Verify(c)
				if code != "" {
					l.fail(fmt.Errorf("%s: claimed delivery %s does not verify: %s", worker, c.EventID, code))
					return
				}
				res, err := kitOf(c.Destination).Deliver(ctx, d)
				if err != nil {
					l.fail(fmt.Errorf("%s deliver: %w", worker, err))
					return
				}
				if res.Status == wire.NonRetryable {
					l.fail(fmt.Errorf("%s: delivery %s refused for good: %s %s", worker, c.EventID, res.Code, res.Ref))
					return
				}
				if res.Status != wire.Acknowledged {
					codes[c.EventID] = res.Code
					left = append(left, c)
					continue
				}
				f := pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}
				if _, err := pgcall.AckDelivery(ctx, disp, f, res.Ack, res.Receipt); err != nil {
					l.fail(fmt.Errorf("%s ack: %w", worker, err))
					return
				}
				acked.Add(1)
				progress = true
			}
			todo = left
		}
		for _, c := range todo { // not acknowledged this round: retried after the policy's delay
			f := pgcall.Fence{Destination: c.Destination, EventID: c.EventID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken}
			if _, err := pgcall.RetryDelivery(ctx, disp, f, codes[c.EventID], nil); err != nil {
				l.fail(fmt.Errorf("%s retry: %w", worker, err))
				return
			}
		}
	}
}

func TestCutoverWhileAppendsAndAcksRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := daSetup(t)
	l := &clLoad{}
	l.core.Store(w.kit(t, w.v1, reference.Spec{}, ""))
	others := map[string]*consumer.Consumer{}
	for dest, name := range map[string]string{
		"metering_input_processor":         reference.MeteringInputProcessorConsumer,
		"billing_finalization_coordinator": reference.BillingFinalizationCoordinatorConsumer,
		"billing_settlement_catch_up":      reference.BillingSettlementCatchUpConsumer,
	} {
		others[dest] = w.Bundle.Kit(t, name, nil)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // the producer: one business run after another while open
		defer wg.Done()
		p := scenario.Producer{Conn: w.producer, Prefix: "cl", Committed: func(ids []string) { l.appended.Add(int64(len(ids))) }}
		for r := 1; ; {
			select {
			case <-stop:
				return
			default:
			}
			if !l.open.Load() {
				l.idle.Store(true)
				time.Sleep(2 * time.Millisecond)
				continue
			}
			l.idle.Store(false)
			if err := p.Runs(ctx, r, r+1); err != nil {
				l.fail(fmt.Errorf("append: %w", err))
				return
			}
			r++
			time.Sleep(20 * time.Millisecond) // a business run (13 events) about every 20-50 ms
		}
	}()
	coreDisp := testdb.Conn(t, w.Bundle.Dsn, "outbox_dispatcher") // one connection per goroutine
	outDisp := testdb.Conn(t, w.Bundle.Dsn, "outbox_dispatcher")
	go func() {
		defer wg.Done()
		clServe(ctx, l, coreDisp, "cl-core", []string{"core_operations"},
			func(string) *consumer.Consumer { return l.core.Load() }, &l.acked, stop)
	}()
	go func() {
		defer wg.Done()
		clServe(ctx, l, outDisp, "cl-other", []string{"metering_input_processor", "billing_finalization_coordinator", "billing_settlement_catch_up"},
			func(d string) *consumer.Consumer { return others[d] }, &l.ackedOut, stop)
	}()
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt()

	// until: waits for cond, failing on a load error or after a generous deadline (a liveness
	// check: the traffic is stuck, not slow).
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !cond(); {
			if err := l.failed(); err != nil {
				t.Fatalf("%s: traffic failed: %v", what, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached (appended %d, acked %d + %d)", what, l.appended.Load(), l.acked.Load(), l.ackedOut.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// kept: appends and acknowledgements have committed since mark (the step did not stop them)
	type mark struct{ appended, acked, ackedOut int64 }
	now := func() mark { return mark{l.appended.Load(), l.acked.Load(), l.ackedOut.Load()} }
	kept := func(step string, m mark, coreToo bool) {
		t.Helper()
		until(step+": appends and acks keep running", func() bool {
			return l.appended.Load() > m.appended && l.ackedOut.Load() > m.ackedOut && (!coreToo || l.acked.Load() > m.acked)
		})
	}
	openCore := func() int {
		t.Helper()
		return consumerfix.Count(t, w.admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = 'core_operations' AND status IN ('pending', 'leased')`)
	}
	quiesce := func(step string) { // the producer stops between runs; core_operations drains
		t.Helper()
		l.open.Store(false)
		until(step+": producer idle", l.idle.Load)
		until(step+": core_operations drained", func() bool { return openCore() == 0 })
	}

	// v1 online under traffic
	l.open.Store(true)
	kept("v1 online", now(), true)

	// the build: started and rebuilt from history while the traffic runs
	// (a building build hands out every event appended so far, so the rebuild chases the
	// producer: once the traffic has gone on during the build, the producer rests until the
	// rebuild has caught up)
	m := now()
	build, err := pgcall.StartShadowBuild(ctx, w.projector, reference.ProjectionName, 2)
	testfix.Must(t, err)
	cfg := w.v2.Config(w.Pool)
	cfg.Role, cfg.BuildToken = consumerfix.Role, build.BuildToken
	builder, err := consumer.New(context.Background(), cfg)
	testfix.Must(t, err)
	rebuilt := make(chan error, 1)
	go func() {
		_, err := builder.Rebuild(ctx, w.projector, build.BuildID, 50)
		rebuilt <- err
	}()
	kept("build", m, true)
	l.open.Store(false)
	testfix.Must(t, <-rebuilt)
	l.open.Store(true)

	// the freeze: core_operations claims paused (runbook), so every event after the boundary
	// reaches the dual-applying kit; the producer keeps appending throughout
	m = now()
	testfix.Must(t, pgcall.PauseDestinationClaims(ctx, w.projector, "core_operations", "cutover operations_timeline@2"))
	until("freeze: core_operations leases ended", func() bool {
		return consumerfix.Count(t, w.admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = 'core_operations' AND status = 'leased'`) == 0
	})
	fz, err := pgcall.FreezeCutoverCandidate(ctx, w.projector, build.BuildID, build.BuildToken)
	testfix.Must(t, err)
	l.core.Store(w.kit(t, w.v1, w.v2, fz.BuildToken))
	w.rebuild(t, build.BuildID, fz.BuildToken) // catch up with the boundary
	kept("freeze (claims of core_operations paused)", m, false)
	testfix.Must(t, pgcall.ResumeDestinationClaims(ctx, w.projector, "core_operations"))
	kept("freeze (dual-apply)", now(), true)

	// the switch: every committed core_operations event is dual-applied first (a later event
	// without the shadow's receipt would block the proof: missingReceipts), then the cutover's
	// transaction stays open while the producer appends and the other destinations' acks commit
	q2 := projectionfix.RegisterSet2(t, w.reg)
	quiesce("switch")
	sw := testdb.Conn(t, w.Bundle.Dsn, "outbox_projector")
	tx, err := sw.Begin(ctx)
	testfix.Must(t, err)
	res, err := pgcall.CutoverProjection(ctx, tx, build.BuildID, fz.BuildToken, q2)
	if err != nil {
		_ = tx.Rollback(ctx)
		t.Fatal(err)
	}
	if res.Result != pgcall.CutoverSwitched {
		_ = tx.Rollback(ctx)
		t.Fatalf("cutover of the caught-up shadow: %+v", res)
	}
	m = now()
	l.open.Store(true)
	kept("switch (its transaction open)", m, false)
	testfix.Must(t, tx.Commit(ctx))
	l.core.Store(w.kit(t, w.v2, w.v1, "")) // v2 active, v1 (frozen, rollback target) kept current
	kept("after the switch", now(), true)

	// drain everything and check: every event published, nothing quarantined, one digest
	quiesce("end")
	until("end: every delivery acknowledged", func() bool {
		return consumerfix.Count(t, w.admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE status <> 'acknowledged'`) == 0
	})
	halt()
	if err := l.failed(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	events := consumerfix.Count(t, w.admin, `SELECT count(*) FROM outbox.outbox_events`)
	if int64(events) != l.appended.Load() {
		t.Fatalf("%d events stored, the producer committed %d", events, l.appended.Load())
	}
	if n := consumerfix.Count(t, w.admin, `SELECT count(*) FROM outbox.outbox_events e WHERE NOT EXISTS (SELECT 1 FROM outbox.outbox_publications p WHERE p.event_id = e.event_id)`); n != 0 {
		t.Fatalf("%d of %d events not published", n, events)
	}
	if n := consumerfix.Count(t, w.admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = 'core_operations' AND required_projection_version = 1`); n == 0 {
		t.Fatal("no delivery frozen to v1 was dual-applied")
	}
	if n := consumerfix.Count(t, w.admin, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = 'core_operations' AND required_projection_version = 2`); n == 0 {
		t.Fatal("no delivery targeted v2 after the switch")
	}
	w.same(t, "after the switch under traffic")
	t.Logf("%d events appended, %d core_operations and %d other acknowledgements", events, l.acked.Load(), l.ackedOut.Load())
}
