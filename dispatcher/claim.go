package dispatcher

import (
	"context"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

func (d *Dispatcher) signalWake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// claimable returns the destinations whose claimed, unfinished deliveries leave room in their
// queue (the destination's concurrency plus prefetch) and how many rows they can take together.
func (d *Dispatcher) claimable() ([]string, int) {
	if len(d.dests) == 1 { // the common case: no per-destination split to compute
		n := d.dests[0]
		room := cap(d.destSlots[n]) + d.prefetch - int(d.claimedBy[n].Load())
		if room <= 0 {
			return nil, 0
		}
		return d.dests, room
	}
	var out []string
	total := 0
	for _, n := range d.dests {
		if room := cap(d.destSlots[n]) + d.prefetch - int(d.claimedBy[n].Load()); room > 0 {
			out = append(out, n)
			total += room
		}
	}
	return out, total
}

// minClaim is the smallest claim worth a round trip while deliveries are in flight: with
// claim-ahead (prefetch > 0) half of a batch, so that a busy dispatcher claims in batches rather
// than one row per freed slot; without it (or when nothing is in flight) one row.
func (d *Dispatcher) minClaim() int {
	if d.prefetch == 0 || d.inflight.Load() == 0 {
		return 1
	}
	return max(1, min(d.cfg.BatchSize, d.prefetch)/2)
}

// nextNotifyHold is the back-off of notification-triggered claims after one found nothing
// (R-SEC-5, issue 26 item 2): doubled from max(wake_coalesce, 10 ms) up to poll_interval. It is
// reset when any claim returns work. The channel carries no proof (any login may NOTIFY it), so
// the bound rests on the dispatcher's own observation: a notifier that keeps announcing work
// that is not there drives at most about log2(poll_interval / wake_coalesce) extra claims, then
// one per poll_interval; a genuine append is still claimed within poll_interval of the last
// claim, the same latency as without LISTEN.
func (d *Dispatcher) nextNotifyHold(cur time.Duration) time.Duration {
	return min(d.cfg.PollInterval, max(2*cur, d.cfg.WakeCoalesce, 10*time.Millisecond))
}

func (d *Dispatcher) claimLoop(ctx context.Context) {
	bo := newBackoff(100*time.Millisecond, 5*time.Second)
	poll := time.NewTimer(d.cfg.PollInterval)
	defer poll.Stop()
	trigger := "poll"
	var lastClaim time.Time
	var notifyHold time.Duration
	capacity := d.cfg.Concurrency + d.prefetch
	for ctx.Err() == nil {
		free := capacity - int(d.inflight.Load())
		dests, destRoom := d.claimable()
		if free < d.minClaim() || destRoom <= 0 {
			select {
			case <-ctx.Done():
				return
			case <-d.slotFreed:
			}
			continue
		}
		n := min(free, destRoom, d.cfg.BatchSize)
		// Wake-ups are bounded (R-SEC-5): any login may NOTIFY the channel, so a burst of them
		// must not turn into a burst of claims - at most one notify-triggered claim per
		// wake_coalesce, and after a notify-triggered claim that found nothing the next one
		// waits longer (nextNotifyHold, up to poll_interval); the notifications arriving
		// meanwhile are absorbed by it.
		if trigger == "notify" {
			if wait := max(d.cfg.WakeCoalesce, notifyHold) - time.Since(lastClaim); wait > 0 && !sleepCtx(ctx, wait) {
				return
			}
			select {
			case <-d.wake:
			default:
			}
		}
		d.m.ClaimCalls.WithLabelValues(trigger).Inc()
		lastClaim = time.Now()
		d.hook(HookBeforeClaim) // T-3 crash window (test-only; no-op otherwise)
		// A claim that started completes even if ctx is cancelled meanwhile, so every claimed row
		// is delivered (or drained) rather than stranded until lease expiry.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StatementTimeout+time.Second)
		rows, err := pgcall.ClaimDeliveries(cctx, d.pool, pgcall.ClaimParams{
			Worker: d.cfg.WorkerName, Destinations: dests, BatchSize: n, Lease: d.cfg.Lease,
		})
		cancel()
		if err != nil {
			d.m.DatabaseErrors.WithLabelValues("claim").Inc()
			wait := bo.next()
			d.log.Warn("claim failed; backing off", "error", safeErr(err), "sqlstate", pgcall.SQLState(err), "backoff", wait.String())
			if !sleepCtx(ctx, wait) {
				return
			}
			continue
		}
		bo.reset()
		switch {
		case len(rows) > 0:
			notifyHold = 0
		case trigger == "notify":
			notifyHold = d.nextNotifyHold(notifyHold)
		}
		if len(rows) > 0 {
			d.hook(HookAfterClaim) // T-3: claimed, no consumer called yet
			if d.inTransport.Load() > 0 && d.out.pending() > 0 {
				// T-3, issue 21: a batch claimed while earlier deliveries are in the transport and
				// an outcome group waits for its flush.
				d.hook(HookPipelinedClaim)
			}
		}
		claimedAt := time.Now()
		for _, r := range rows {
			d.start(r, claimedAt)
		}
		if len(rows) == n {
			trigger = "more"
			continue // probably more work
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
		poll.Reset(d.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
			trigger = "notify"
		case <-poll.C:
			trigger = "poll"
		}
	}
}

func (d *Dispatcher) start(r pgcall.ClaimedDelivery, claimedAt time.Time) {
	d.m.Claims.WithLabelValues(r.Destination, r.EventType, r.EventSchemaVersion).Inc()
	d.inflight.Add(1)
	claimed := d.claimedBy[r.Destination]
	if claimed != nil {
		claimed.Add(1)
	}
	d.delivering.Add(1)
	d.m.InFlight.Inc()
	d.wg.Add(1)
	go func() {
		// release gives back the delivery's place in the pipeline (its claim capacity): when it
		// hands its outcome over (leave) or, at the latest, when it ends.
		released := false
		release := func() {
			if released {
				return
			}
			released = true
			if claimed != nil {
				claimed.Add(-1)
			}
			d.inflight.Add(-1)
			d.m.InFlight.Dec()
			select {
			case d.slotFreed <- struct{}{}:
			default:
			}
		}
		defer func() {
			release()
			d.wg.Done()
		}()
		d.handle(r, claimedAt, release)
	}()
}
