package dispatcher

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// outcomeCall runs one fenced kernel call. Transient database errors are retried with backoff
// while the lease may still be live; kernel rejections return at once. The call itself is not
// cut by the shutdown grace (it is bounded by the statement timeout), retries are.
func (d *Dispatcher) outcomeCall(j *job, op string, call func(ctx context.Context) error) error {
	bo := newBackoff(50*time.Millisecond, 2*time.Second)
	for {
		// Once the shutdown grace is over nothing new is recorded: a call still waiting for a
		// database slot leaves its delivery to lease expiry. A call already running completes
		// (bounded by the statement timeout).
		if !d.acquireDB(d.hard) {
			d.abandoned.Add(1)
			return errShutdown
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(d.hard), d.cfg.StatementTimeout+time.Second)
		err := call(ctx)
		cancel()
		d.releaseDB()
		d.m.OutcomeBatchSize.WithLabelValues(op).Observe(1)
		if err == nil || !isTransientDB(err) {
			return err
		}
		d.m.DatabaseErrors.WithLabelValues(op).Inc()
		wait := bo.next()
		if time.Now().Add(wait).After(j.leaseDeadline()) || d.hard.Err() != nil {
			return err
		}
		j.log.Warn("outcome call failed; retrying", "operation", op, "error", safeErr(err), "backoff", wait.String())
		if !sleepCtx(d.hard, wait) {
			return err
		}
	}
}

func (d *Dispatcher) acquireDB(ctx context.Context) bool {
	select {
	case d.dbSlots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (d *Dispatcher) releaseDB() { <-d.dbSlots }

// isTransientDB reports a database error worth retrying: no SQLSTATE (connection lost, dial
// failure), connection exceptions (08), operator intervention (57: shutdown, cancel, statement
// timeout), insufficient resources (53), serialization failure or deadlock (40).
func isTransientDB(err error) bool {
	s := pgcall.SQLState(err)
	if s == "" {
		return !errors.Is(err, context.Canceled)
	}
	switch s[:2] {
	case "08", "57", "53", "40":
		return true
	}
	return false
}

// isDocumentRejection reports the kernel refusing the consumer's ack/receipt documents: ack
// rejected (OB002), not canonicalizable (OB201), or a data exception (class 22, e.g. not JSON).
func isDocumentRejection(err error) bool {
	if errors.Is(err, pgcall.ErrAckRejected) || errors.Is(err, pgcall.ErrNotCanonicalizable) {
		return true
	}
	s := pgcall.SQLState(err)
	return strings.HasPrefix(s, "22")
}

// safeErr renders an error for a log line without any document content: kernel errors show
// their SQLSTATE and message (never the DETAIL), others their text with passwords redacted.
func safeErr(err error) string {
	if err == nil {
		return ""
	}
	var ke *pgcall.Error
	if errors.As(err, &ke) {
		return ke.Sentinel.Error() + " (" + ke.PgErr.Code + "): " + ke.PgErr.Message
	}
	s := err.Error()
	if i := strings.Index(s, "password="); i >= 0 {
		s = s[:i] + "password=REDACTED"
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(minD, maxD time.Duration) *backoff { return &backoff{min: minD, max: maxD} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	// ±20 % jitter so that several dispatchers do not retry in lockstep.
	j := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(b.cur) * j)
}

func (b *backoff) reset() { b.cur = 0 }

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
