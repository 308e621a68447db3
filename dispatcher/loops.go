package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// mergeDone returns a context cancelled when either a or b is done.
func mergeDone(a, b context.Context) context.Context {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	go func() { <-ctx.Done(); stop() }()
	return ctx
}

func (d *Dispatcher) listenLoop(ctx context.Context) {
	bo := newBackoff(200*time.Millisecond, 10*time.Second)
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, d.listenCfg)
		if err == nil {
			err = pgcall.ListenDeliveries(ctx, conn)
		}
		if err == nil {
			bo.reset()
			d.log.Debug("listening", "channel", pgcall.DeliveryChannel)
			d.signalWake() // anything appended while we were not listening
			for {
				n, werr := conn.WaitForNotification(ctx)
				if werr != nil {
					err = werr
					break
				}
				if d.destSet[n.Payload] {
					d.signalWake()
				}
			}
		}
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		d.m.DatabaseErrors.WithLabelValues("listen").Inc()
		wait := bo.next()
		d.log.Warn("listen connection lost; polling until it is back", "error", safeErr(err), "backoff", wait.String())
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

func (d *Dispatcher) recoveryLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next := d.cfg.RecoveryInterval
		cctx, cancel := context.WithTimeout(ctx, d.cfg.StatementTimeout+time.Second)
		n, err := pgcall.RecoverExpiredLeases(cctx, d.pool, d.cfg.RecoveryBatch)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			d.m.DatabaseErrors.WithLabelValues("recover").Inc()
			d.log.Warn("lease recovery failed", "error", safeErr(err), "sqlstate", pgcall.SQLState(err))
		case n > 0:
			d.m.LeaseExpiries.Add(float64(n))
			d.log.Info("expired leases recovered (lease_expired_unknown)", "count", n)
			d.signalWake()
			if n >= d.cfg.RecoveryBatch {
				next = 0
			}
		}
		t.Reset(next)
	}
}

func (d *Dispatcher) statsLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.RefreshStats(ctx)
		t.Reset(d.cfg.StatsInterval)
	}
}

// RefreshStats reads outbox.delivery_stats into the pending/leased/oldest-age gauges.
func (d *Dispatcher) RefreshStats(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, d.cfg.StatementTimeout+time.Second)
	defer cancel()
	rows, err := pgcall.DeliveryStats(cctx, d.pool)
	if err != nil {
		if ctx.Err() == nil {
			d.m.DatabaseErrors.WithLabelValues("stats").Inc()
			d.m.StatsUp.Set(0)
		}
		return
	}
	out := make([]metrics.DestinationStats, 0, len(rows))
	for _, r := range rows {
		out = append(out, metrics.DestinationStats{Destination: r.Destination, Pending: r.Pending, Leased: r.Leased, OldestPendingAge: r.OldestPendingAge, OldestGapAge: r.OldestGapAge})
	}
	d.m.SetStats(d.dests, out)
	d.m.StatsUp.Set(1)
}
