package dispatcher

// Grouped outcome calls (SPEC R-AK-9, issue 9 item 6). Deliveries that finish close together
// share one ack_deliveries / retry_deliveries / quarantine_deliveries call: one transaction
// and one round trip for the group instead of one per delivery. Each item still carries its own
// fence and is judged by the kernel on its own; the delivery that submitted it handles that
// answer exactly like the one-row call's error. A lone delivery is never delayed, a group of one
// uses the one-row call, and a call that fails as a whole is retried item by item.
//
// When a group is flushed, and the whole-call failure path:
// docs/dispatcher.md#grouped-outcome-calls-internaldispatcheroutcomesgo.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// outcomeResult is what a delivery waiting for its outcome gets back.
type outcomeResult struct {
	outcome string // complete | not_complete, pending | quarantined, quarantined
	err     error  // the item's rejection (a *pgcall.Error), errShutdown, or nil
	// single: record this item with its own one-row call (a group of one, or a batch call that
	// failed as a whole).
	single bool
}

type pendingOutcome[T any] struct {
	item  T
	fence pgcall.Fence
	done  chan outcomeResult
}

// kicker is the part of a batcher that does not depend on its item type.
type kicker interface{ kick() }

// batcher groups the outcomes of one kind (ack, retry or quarantine).
type batcher[T any] struct {
	op       string
	interval time.Duration
	max      int
	// idle reports that no delivery is still running (none could join the group).
	idle func() bool
	// call records a group of two or more items and returns one result per item, in order.
	call func(items []pendingOutcome[T]) []outcomeResult

	// maxCalls bounds this batcher's batch calls running at once (group commit): while that
	// many are running, the open group is not flushed but grows, and is recorded as soon as a
	// call returns. Many small concurrent outcome calls contend for the same rows, connections
	// and commits; a few larger ones do the same work with less of each. 0: unbounded.
	maxCalls int

	mu      sync.Mutex
	group   []pendingOutcome[T]
	timer   *time.Timer
	gen     uint64
	running int // batch calls running
}

// submit adds item to the open group and waits for its result. left is called under the
// batcher's lock right after the item joined (the delivery stops counting as running); when it
// returns true the other batchers are kicked (see Dispatcher.leave).
func (b *batcher[T]) submit(item T, fence pgcall.Fence, left func() bool, others func()) outcomeResult {
	p := pendingOutcome[T]{item: item, fence: fence, done: make(chan outcomeResult, 1)}
	b.mu.Lock()
	b.group = append(b.group, p)
	last := left()
	var g []pendingOutcome[T]
	switch {
	case (len(b.group) >= b.max || b.interval <= 0 || b.idle()) && b.mayCallLocked():
		g = b.takeLocked()
	case len(b.group) == 1:
		gen := b.gen
		b.timer = time.AfterFunc(b.interval, func() { b.flush(gen) })
	}
	b.mu.Unlock()
	if last {
		others()
	}
	if g != nil {
		b.run(g)
	}
	return <-p.done
}

// mayCallLocked reports whether another batch call may start now.
func (b *batcher[T]) mayCallLocked() bool { return b.maxCalls <= 0 || b.running < b.maxCalls }

// takeLocked takes the open group (at most max items; the rest stays open) for one call.
func (b *batcher[T]) takeLocked() []pendingOutcome[T] {
	g := b.group
	b.group = nil
	if len(g) > b.max {
		b.group = append([]pendingOutcome[T](nil), g[b.max:]...)
		g = g[:b.max]
	}
	b.running++
	b.gen++
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return g
}

// flush records the group of generation gen if it is still open (the interval ran out).
func (b *batcher[T]) flush(gen uint64) {
	b.mu.Lock()
	var g []pendingOutcome[T]
	if b.gen == gen && len(b.group) > 0 && b.mayCallLocked() {
		g = b.takeLocked()
	}
	// Otherwise a call is running: the group is recorded when it returns (run).
	b.mu.Unlock()
	if g != nil {
		b.run(g)
	}
}

// kick records the open group now, in its own goroutine (the last running delivery ended).
func (b *batcher[T]) kick() {
	b.mu.Lock()
	var g []pendingOutcome[T]
	if len(b.group) > 0 && b.mayCallLocked() {
		g = b.takeLocked()
	}
	b.mu.Unlock()
	if g != nil {
		go b.run(g)
	}
}

// run records g, then - group commit - the group that grew while it ran, if any, before it
// gives back its call slot.
func (b *batcher[T]) run(g []pendingOutcome[T]) {
	for g != nil {
		if len(g) == 1 {
			g[0].done <- outcomeResult{single: true}
		} else {
			res := b.call(g)
			for i, p := range g {
				p.done <- res[i]
			}
		}
		b.mu.Lock()
		b.running--
		g = nil
		if len(b.group) > 0 && b.mayCallLocked() {
			g = b.takeLocked()
		}
		b.mu.Unlock()
	}
}

// pending is the number of outcomes in the open group.
func (b *batcher[T]) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.group)
}

// pending is the number of outcomes waiting in open groups.
func (o *outcomeBatchers) pending() int {
	n := 0
	for _, b := range o {
		n += b.pending()
	}
	return n
}

// outcomeBatchers are the dispatcher's batchers, one per outcome kind (kinds.go).
type outcomeBatchers [numKinds]*batcher[outcomeItem]

// maxGroup is the most items one grouped call carries: the kernel's bound per call.
const maxGroup = 1000

func (d *Dispatcher) newBatchers() {
	idle := func() bool { return d.delivering.Load() == 0 }
	calls := outcomeCallsInFlight(d.cfg.DBMaxConns)
	for k := range outcomeKinds {
		kind := &outcomeKinds[k]
		d.out[k] = &batcher[outcomeItem]{op: kind.op, interval: d.cfg.OutcomeFlushInterval, max: maxGroup, idle: idle, maxCalls: calls,
			call: func(g []pendingOutcome[outcomeItem]) []outcomeResult {
				return batchCall(d, kind.op, g, func(ctx context.Context, items []outcomeItem) ([]pgcall.ItemOutcome, error) {
					return d.groupCall(ctx, kind, items)
				})
			}}
	}
}

// outcomeCallsInFlight is how many batch calls of one kind (ack, retry, quarantine) may run at
// once: a third of the connections outcome calls may use (db_max_conns − 2), between 1 and 4.
func outcomeCallsInFlight(dbMaxConns int) int {
	return min(4, max(1, (dbMaxConns-2)/3))
}

// kickAll records every open group now (no delivery is running any more).
func (d *Dispatcher) kickAll(except kicker) {
	for _, b := range d.out {
		if kicker(b) != except {
			b.kick()
		}
	}
}

// leave marks j as no longer running (its outcome is about to be recorded, or it ends without
// one). It reports whether j was the last running delivery.
//
// It also gives back j's place in the pipeline at once (issue 36 item 3), so that the next
// claim does not wait for j's outcome group to be recorded: outcome groups then grow with the
// load instead of being capped by the pipeline's capacity. At most maxAwaiting deliveries wait
// for their outcome that way; beyond that a delivery keeps its place until its outcome is
// recorded (back-pressure when the database records outcomes slower than they arrive).
func (d *Dispatcher) leave(j *job) bool {
	if !j.running {
		return false
	}
	j.running = false
	if d.awaiting.Add(1) <= maxAwaiting {
		j.early = true
		if j.releaseSlot != nil {
			j.releaseSlot()
		}
	} else {
		d.awaiting.Add(-1)
	}
	return d.delivering.Add(-1) == 0
}

// maxAwaiting bounds the deliveries that gave back their place in the pipeline while their
// outcome waits in a group (leave): one full group.
const maxAwaiting = maxGroup

// record hands j's outcome of kind k to its batcher and waits for it; when the batcher answers
// single (a group of one, or a group call that failed as a whole), or the item cannot travel in
// a group, it records it with the one-row call, retrying transient database errors as
// outcomeCall does.
func (d *Dispatcher) record(j *job, k int, it outcomeItem) (string, error) {
	kind := &outcomeKinds[k]
	if kind.groupable == nil || kind.groupable(it) {
		b := d.out[k]
		r := b.submit(it, j.fence, func() bool { return d.leave(j) }, func() { d.kickAll(b) })
		if !r.single {
			return r.outcome, r.err
		}
	} else if d.leave(j) {
		d.kickAll(nil)
	}
	var out string
	err := d.outcomeCall(j, kind.op, func(ctx context.Context) error {
		var err error
		out, err = kind.one(ctx, d.pool, it)
		return err
	})
	return out, err
}

// groupCall runs kind's grouped call. With a hook set (tests only) and a hook point for the kind,
// the call runs inside an explicit transaction so that the hook can kill the process after the
// statement returned its rows and before its commit (T-3, R-AK-9: all or nothing).
func (d *Dispatcher) groupCall(ctx context.Context, kind *outcomeKind, items []outcomeItem) ([]pgcall.ItemOutcome, error) {
	if d.hookFn == nil || kind.hookInGroup == "" {
		return kind.group(ctx, d.pool, items)
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	outs, err := kind.group(ctx, tx, items)
	if err != nil {
		return nil, err
	}
	deliveries := make([]string, len(items))
	for i, it := range items {
		deliveries[i] = it.fence.Destination + "/" + it.fence.EventID
	}
	d.log.Info("test mode: "+kind.function+" returned; its transaction is not committed yet", "items", len(items), "deliveries", deliveries)
	d.hook(kind.hookInGroup)
	return outs, tx.Commit(ctx)
}

// batchCall records a group of two or more items with one batch call. Like outcomeCall, it waits
// for a database slot (none once the shutdown grace is over: the items are left to lease
// expiry) and is bounded by the statement timeout. A whole-call failure sends every item back
// to its delivery to be recorded one by one.
func batchCall[T any](d *Dispatcher, op string, g []pendingOutcome[T], call func(ctx context.Context, items []T) ([]pgcall.ItemOutcome, error)) []outcomeResult {
	res := make([]outcomeResult, len(g))
	if !d.acquireDB(d.hard) {
		d.abandoned.Add(int64(len(g)))
		for i := range res {
			res[i].err = errShutdown
		}
		return res
	}
	items := make([]T, len(g))
	for i, p := range g {
		items[i] = p.item
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.hard), d.cfg.StatementTimeout+time.Second)
	outs, err := call(ctx, items)
	cancel()
	d.releaseDB()
	d.m.OutcomeBatchSize.WithLabelValues(op).Observe(float64(len(g)))
	if err == nil {
		err = checkRows(g, outs)
	}
	if err != nil {
		if isTransientDB(err) {
			d.m.DatabaseErrors.WithLabelValues(op).Inc()
		}
		d.log.Warn("batch outcome call failed as a whole (nothing recorded); recording its items one by one",
			"operation", op, "items", len(g), "error", safeErr(err), "sqlstate", pgcall.SQLState(err))
		for i := range res {
			res[i].single = true
		}
		return res
	}
	for i, o := range outs {
		res[i] = outcomeResult{outcome: o.Outcome, err: itemError(op, o)}
	}
	return res
}

// checkRows verifies that the kernel answered one row per item, in input order.
func checkRows[T any](g []pendingOutcome[T], outs []pgcall.ItemOutcome) error {
	if len(outs) != len(g) {
		return fmt.Errorf("batch outcome call returned %d rows for %d items", len(outs), len(g))
	}
	for i, o := range outs {
		if o.Destination != g[i].fence.Destination || !strings.EqualFold(o.EventID, g[i].fence.EventID) ||
			!strings.EqualFold(o.AttemptID, g[i].fence.AttemptID) {
			return fmt.Errorf("batch outcome call: row %d is not its item", i+1)
		}
	}
	return nil
}

// itemError is the rejected item's one-row error (pgcall.ItemOutcome.Err), named by the call;
// nil when the item was accepted.
func itemError(op string, o pgcall.ItemOutcome) error {
	if err := o.Err(); err != nil {
		return fmt.Errorf("%s deliveries: %w", op, err)
	}
	return nil
}
