package dispatcher

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// renewLoop extends the lease every renew_fraction × lease while the delivery runs (R-CL-4).
// A fencing rejection cancels the delivery: someone else owns it now.
func (d *Dispatcher) renewEvery() time.Duration {
	return time.Duration(float64(d.cfg.Lease) * d.cfg.RenewFraction)
}

// renewLoop runs from the first renewal on (started by a timer renew_fraction × lease after the
// delivery began) until done is closed.
func (d *Dispatcher) renewLoop(j *job, done <-chan struct{}, cancelDelivery context.CancelFunc, fenced *atomic.Bool) {
	every := d.renewEvery()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if !d.acquireDB(d.hard) {
			return
		}
		ctx, cancel := context.WithTimeout(d.hard, d.cfg.StatementTimeout+time.Second)
		sent := time.Now()
		_, err := pgcall.RenewLease(ctx, d.pool, j.fence, d.cfg.Lease)
		cancel()
		d.releaseDB()
		switch {
		case err == nil:
			j.mu.Lock()
			j.leaseEnds = sent.Add(d.cfg.Lease)
			j.mu.Unlock()
			t.Reset(every)
		case errors.Is(err, pgcall.ErrFencingRejected):
			d.m.FencingRejections.WithLabelValues(j.r.Destination, "renew").Inc()
			fenced.Store(true)
			cancelDelivery()
			return
		default:
			if d.hard.Err() != nil {
				return
			}
			d.m.DatabaseErrors.WithLabelValues("renew").Inc()
			j.log.Warn("lease renewal failed; will retry", "error", safeErr(err), "sqlstate", pgcall.SQLState(err))
			t.Reset(min(every, time.Second))
		}
	}
}
