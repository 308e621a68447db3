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
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"
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
	return o.acks.pending() + o.retries.pending() + o.quarantines.pending()
}

// outcomeBatchers are the dispatcher's three batchers.
type outcomeBatchers struct {
	acks        *batcher[pgcall.AckItem]
	retries     *batcher[pgcall.RetryItem]
	quarantines *batcher[pgcall.QuarantineItem]
}

func (d *Dispatcher) newBatchers() {
	maxItems := min(max(d.cfg.BatchSize, 1), 1000) // 1000: the kernel's bound per call
	idle := func() bool { return d.delivering.Load() == 0 }
	calls := outcomeCallsInFlight(d.cfg.DBMaxConns)
	d.out.acks = &batcher[pgcall.AckItem]{op: "ack", interval: d.cfg.OutcomeFlushInterval, max: maxItems, idle: idle, maxCalls: calls,
		call: func(g []pendingOutcome[pgcall.AckItem]) []outcomeResult {
			return batchCall(d, "ack", g, d.ackBatch)
		}}
	d.out.retries = &batcher[pgcall.RetryItem]{op: "retry", interval: d.cfg.OutcomeFlushInterval, max: maxItems, idle: idle, maxCalls: calls,
		call: func(g []pendingOutcome[pgcall.RetryItem]) []outcomeResult {
			return batchCall(d, "retry", g, func(ctx context.Context, items []pgcall.RetryItem) ([]pgcall.ItemOutcome, error) {
				return pgcall.RetryDeliveriesTyped(ctx, d.pool, items)
			})
		}}
	d.out.quarantines = &batcher[pgcall.QuarantineItem]{op: "quarantine", interval: d.cfg.OutcomeFlushInterval, max: maxItems, idle: idle, maxCalls: calls,
		call: func(g []pendingOutcome[pgcall.QuarantineItem]) []outcomeResult {
			return batchCall(d, "quarantine", g, func(ctx context.Context, items []pgcall.QuarantineItem) ([]pgcall.ItemOutcome, error) {
				return pgcall.QuarantineDeliveriesTyped(ctx, d.pool, items)
			})
		}}
}

// outcomeCallsInFlight is how many batch calls of one kind (ack, retry, quarantine) may run at
// once: a third of the connections outcome calls may use (db_max_conns − 2), between 1 and 4.
func outcomeCallsInFlight(dbMaxConns int) int {
	return min(4, max(1, (dbMaxConns-2)/3))
}

// kickAll records every open group now (no delivery is running any more).
func (d *Dispatcher) kickAll(except kicker) {
	for _, k := range []kicker{d.out.acks, d.out.retries, d.out.quarantines} {
		if k != except {
			k.kick()
		}
	}
}

// leave marks j as no longer running (its outcome is about to be recorded, or it ends without
// one). It reports whether j was the last running delivery.
func (d *Dispatcher) leave(j *job) bool {
	if !j.running {
		return false
	}
	j.running = false
	return d.delivering.Add(-1) == 0
}

// record hands one outcome to its batcher and waits for it; when the batcher answers single
// (a group of one, or a batch that failed as a whole) it records it with the one-row call,
// retrying transient database errors as outcomeCall does.
func record[T any](d *Dispatcher, j *job, b *batcher[T], item T, one func(ctx context.Context) (string, error)) (string, error) {
	r := b.submit(item, j.fence, func() bool { return d.leave(j) }, func() { d.kickAll(b) })
	if !r.single {
		return r.outcome, r.err
	}
	var out string
	err := d.outcomeCall(j, b.op, func(ctx context.Context) error {
		var err error
		out, err = one(ctx)
		return err
	})
	return out, err
}

// recordSingle records one outcome with the one-row call, outside any group (an item the batch
// document could not carry).
func (d *Dispatcher) recordSingle(j *job, op string, one func(ctx context.Context) (string, error)) (string, error) {
	if d.leave(j) {
		d.kickAll(nil)
	}
	var out string
	err := d.outcomeCall(j, op, func(ctx context.Context) error {
		var err error
		out, err = one(ctx)
		return err
	})
	return out, err
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

// ackBatch calls ack_deliveries. With failpoints armed (tests only) the call runs inside an
// explicit transaction so that the during_batch_ack failpoint can kill the process after the
// statement returned its rows and before its commit (T-3, R-AK-9: all or nothing).
func (d *Dispatcher) ackBatch(ctx context.Context, items []pgcall.AckItem) ([]pgcall.ItemOutcome, error) {
	if !failpoint.Armed() {
		return pgcall.AckDeliveriesTyped(ctx, d.pool, items)
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	outs, err := pgcall.AckDeliveriesTyped(ctx, tx, items)
	if err != nil {
		return nil, err
	}
	deliveries := make([]string, len(items))
	for i, it := range items {
		deliveries[i] = it.Destination + "/" + it.EventID
	}
	d.log.Info("test mode: ack_deliveries returned; its transaction is not committed yet", "items", len(items), "deliveries", deliveries)
	failpoint.Inject(failpoint.DuringBatchAck)
	return outs, tx.Commit(ctx)
}
