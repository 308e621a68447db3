package intake

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// Send queues sub for the background sender and returns at once: it never blocks and never
// fails the caller. It reports whether sub was queued; when the buffer is full (or the client
// is closed) sub is dropped and counted as a send failure (reason queue_full, or closed).
func (c *Client) Send(sub Submission) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		c.m.sendFailures.WithLabelValues(ReasonClosed).Inc()
		return false
	}
	select {
	case c.queue <- newItem(sub):
		return true
	default:
		c.fail(ReasonQueueFull, 1)
		return false
	}
}

// Enqueue is Send.
func (c *Client) Enqueue(sub Submission) bool { return c.Send(sub) }

type flushRequest struct {
	ctx  context.Context
	done chan struct{}
}

// Flush waits until every submission queued before it has been answered or counted as a send
// failure (quota waits and backoff included), then reports the counted send failures. Items
// still unsent when ctx ends are counted as send failures (reason shutdown). It returns
// ctx.Err() when ctx ended first, and an error after Close.
func (c *Client) Flush(ctx context.Context) error {
	req := flushRequest{ctx: ctx, done: make(chan struct{})}
	select {
	case c.flushReq <- req:
	case <-c.loopDone:
		return errors.New("intake: client closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	<-req.done // the sender gives up on ctx itself
	return ctx.Err()
}

// Close stops accepting submissions (Send then drops and counts them, reason closed), flushes
// the buffer like Flush, reports the counted send failures and stops the background sender.
// It waits for all of that, bounded by ctx: what is still unsent when ctx ends is counted
// (reason shutdown) and the final report gets at most Options.CallTimeout after ctx. Close is
// idempotent; the pool is not closed.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.closeCtx = ctx
		c.cancelRun() // the sender picks closeCtx up after runCtx ends
	})
	<-c.loopDone
	<-c.repDone
	return ctx.Err()
}

// run is the background sender: one batch at a time, from the queue and what a quota retry or
// a transient error left over.
func (c *Client) run() {
	defer close(c.loopDone)
	var carry []item // items a wait was interrupted for (Close)
	for {
		if len(carry) == 0 {
			select {
			case it := <-c.queue:
				carry = append(carry, it)
			case req := <-c.flushReq:
				c.flush(req.ctx, nil)
				c.report(req.ctx)
				close(req.done)
				continue
			case <-c.runCtx.Done():
			}
		}
		if c.runCtx.Err() != nil { // Close: no Send can queue any more
			c.flush(c.closeCtx, carry)
			return
		}
		carry, _ = c.round(c.runCtx, carry, -1)
	}
}

// flush sends carry and the items queued now (not those queued later), waiting as needed
// within ctx; what is left when ctx ends is counted as failed (shutdown).
func (c *Client) flush(ctx context.Context, carry []item) {
	limit := len(c.queue)
	for {
		var taken int
		carry, taken = c.round(ctx, carry, limit)
		limit -= taken
		if ctx.Err() != nil {
			n := len(carry)
			for ; limit > 0; limit-- {
				select {
				case <-c.queue:
					n++
				default:
					limit = 0
				}
			}
			if n > 0 {
				c.fail(ReasonShutdown, n)
			}
			return
		}
		if len(carry) == 0 && (limit <= 0 || taken == 0) {
			return
		}
	}
}

// round fills one batch (batch, then the queue, at most limit new items when limit ≥ 0) and
// sends it until every item is answered or failed. It returns the unsent items when a wait is
// interrupted by ctx, else nil.
func (c *Client) round(ctx context.Context, batch []item, limit int) (left []item, taken int) {
	errTries := 0
	for {
	fill:
		for len(batch) < c.opts.BatchSize && (limit < 0 || taken < limit) {
			select {
			case it := <-c.queue:
				batch = append(batch, it)
				taken++
			default:
				break fill
			}
		}
		if len(batch) == 0 {
			return nil, taken
		}
		var wait time.Duration
		batch, wait, errTries = c.sendBatch(ctx, batch, errTries)
		if len(batch) == 0 {
			return nil, taken
		}
		if err := c.opts.Sleep(ctx, wait); err != nil {
			return batch, taken
		}
	}
}

// sendBatch makes one call for batch and returns the items to resubmit and how long to wait
// first.
func (c *Client) sendBatch(ctx context.Context, batch []item, errTries int) ([]item, time.Duration, int) {
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.CallTimeout)
	outs, err := c.call(callCtx, batch)
	cancel()
	if err != nil {
		switch {
		case errors.Is(err, pgcall.ErrNotAWorkload):
			c.log.Error("intake: the pool's role is not a registered workload; observations dropped", "count", len(batch), "sqlstate", "OB704")
			c.fail(ReasonNotAWorkload, len(batch))
			return nil, 0, 0
		case !transient(err):
			c.log.Error("intake: accept_observations failed; observations dropped", "count", len(batch), "error", err)
			c.fail(ReasonError, len(batch))
			return nil, 0, 0
		case errTries >= c.opts.MaxErrorRetries:
			c.log.Warn("intake: database unavailable, retries exhausted; observations dropped", "count", len(batch), "retries", errTries, "error", err)
			c.fail(ReasonUnavailable, len(batch))
			return nil, 0, 0
		}
		c.m.retries.WithLabelValues(ReasonUnavailable).Add(float64(len(batch)))
		c.log.Warn("intake: accept_observations failed; retrying", "count", len(batch), "retry", errTries+1, "error", err)
		return batch, c.backoff(errTries), errTries + 1
	}
	var retry []item
	var wait time.Duration
	quotaFailed := 0
	for i, o := range outs {
		if d, ok := o.RetryAfter(); ok {
			it := batch[i]
			if it.quotaTries < c.opts.MaxQuotaRetries {
				it.quotaTries++
				retry = append(retry, it)
				wait = max(wait, min(max(d, time.Second), c.opts.MaxRetryAfter))
				continue
			}
			quotaFailed++
			continue
		}
		c.m.outcome(o)
	}
	if quotaFailed > 0 {
		c.log.Warn("intake: rate quota still exceeded after retries; observations dropped", "count", quotaFailed, "retries", c.opts.MaxQuotaRetries)
		c.fail(ReasonQuota, quotaFailed)
	}
	if len(retry) > 0 {
		c.m.retries.WithLabelValues(ReasonQuota).Add(float64(len(retry)))
		c.log.Info("intake: rate quota exceeded; waiting before resubmitting", "count", len(retry), "wait", wait.String())
	}
	return retry, wait, 0
}

func (c *Client) backoff(tries int) time.Duration {
	d := c.opts.InitialBackoff << min(tries, 20)
	if d <= 0 || d > c.opts.MaxBackoff {
		d = c.opts.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// transient reports whether a failed call is worth resubmitting as is: the server answered
// with a connection exception (08), lack of resources (53), an operator intervention such as a
// shutdown or our own statement timeout (57), a serialization failure or deadlock (40); or
// there was no answer at all (the pool, the network, a timeout).
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57", "40":
			return true
		}
		return false
	}
	if errors.Is(err, errOutcomeCount) {
		return false
	}
	return !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// fail counts n items not sent for reason: in the metric now, in the next report later.
func (c *Client) fail(reason string, n int) {
	c.m.sendFailures.WithLabelValues(reason).Add(float64(n))
	c.failMu.Lock()
	if len(c.failures) == 0 {
		c.failFrom = time.Now()
	}
	c.failures[reason] += n
	c.failMu.Unlock()
}

func (c *Client) reportLoop() {
	defer close(c.repDone)
	t := time.NewTicker(c.opts.ReportInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.report(c.runCtx)
		case <-c.loopDone: // the sender's last act was its final flush
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.closeCtx), c.opts.CallTimeout)
			c.report(ctx)
			cancel()
			return
		}
	}
}

// report sends the counted failures through intake.record_send_failures, one row per reason
// over [first failure, now). Counts whose report fails transiently are kept for the next one.
func (c *Client) report(ctx context.Context) {
	c.reportMu.Lock()
	defer c.reportMu.Unlock()
	c.failMu.Lock()
	counts, from := c.failures, c.failFrom
	c.failures = map[string]int{}
	c.failMu.Unlock()
	if len(counts) == 0 {
		return
	}
	end := time.Now()
	if end.Sub(from) < time.Millisecond {
		end = from.Add(time.Millisecond)
	}
	if end.Sub(from) > 24*time.Hour {
		from = end.Add(-24 * time.Hour)
	}
	keep := map[string]int{}
	for reason, n := range counts {
		if reason == ReasonClosed {
			continue
		}
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.CallTimeout)
		err := pgcall.RecordSendFailures(callCtx, c.pool, n, from, end, reason)
		cancel()
		switch {
		case err == nil:
			c.m.reports.WithLabelValues("ok").Inc()
		case transient(err):
			c.m.reports.WithLabelValues("error").Inc()
			c.log.Warn("intake: record_send_failures failed; kept for the next report", "reason", reason, "count", n, "error", err)
			keep[reason] = n
		default:
			c.m.reports.WithLabelValues("error").Inc()
			c.log.Error("intake: record_send_failures failed; count dropped", "reason", reason, "count", n, "error", err)
		}
	}
	if len(keep) > 0 {
		c.failMu.Lock()
		if len(c.failures) == 0 || from.Before(c.failFrom) {
			c.failFrom = from
		}
		for r, n := range keep {
			c.failures[r] += n
		}
		c.failMu.Unlock()
	}
}
