package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/wire"
)

// RebuildStats counts what Rebuild did with the sources of a shadow build.
type RebuildStats struct {
	Applied  int      // events applied (or found applied) under the shadow version, each with its receipt
	Skipped  int      // sources this consumer does not apply (other event types, observations)
	Refused  []string // event ids the consumer refuses (non-retryable), as a delivery would be quarantined
	Waiting  int      // events still waiting for an earlier revision of their aggregate when Rebuild ended
	Claimed  int      // sources claimed from the build
	Attempts int      // apply attempts, retries of waiting events included
}

// Rebuild builds the shadow projection version c is configured for (Config.ProjectionVersion
// the shadow's, Config.BuildToken its live build token) from the kernel's own history (SPEC
// R-PV-1): it claims the build's sources with outbox.claim_rebuild_sources on claimer (a session
// of role outbox_projector) in batches, checks each envelope against its digest, and applies
// every event this consumer supports exactly as a delivery would be applied - the same Apply,
// the same revision order, the same receipt, in one transaction of c's database each - without
// the delivery machinery. Events waiting for an earlier revision are retried after each batch
// and at the end; an event the consumer refuses (non-retryable, where a delivery would be
// quarantined) is listed in RebuildStats.Refused, never skipped silently; a transient failure is
// retried up to 5 times, then Rebuild fails - a claimed source is handed out once per build, so
// the build must then be restarted (outbox.start_shadow_build). It returns when the build has no
// more sources: an empty batch (for a frozen build: when it has caught up with its boundary).
func (c *Consumer) Rebuild(ctx context.Context, claimer pgcall.DBTX, buildID string, batch int) (RebuildStats, error) {
	var st RebuildStats
	if c.cfg.BuildToken == "" {
		return st, errors.New("consumer: Rebuild needs a kit configured with the shadow's BuildToken")
	}
	if batch <= 0 {
		batch = 100
	}
	var waiting []Event
	retry := func() error {
		for progress := true; progress && len(waiting) > 0; {
			progress = false
			left := waiting[:0]
			for _, ev := range waiting {
				done, wait, err := c.rebuildOne(ctx, ev, &st)
				switch {
				case err != nil:
					return err
				case wait:
					left = append(left, ev)
				case done:
					progress = true
				}
			}
			waiting = left
		}
		return nil
	}
	for {
		srcs, err := pgcall.ClaimRebuildSources(ctx, claimer, buildID, c.cfg.BuildToken, batch)
		if err != nil {
			return st, err
		}
		if len(srcs) == 0 {
			break
		}
		st.Claimed += len(srcs)
		for _, s := range srcs {
			if s.Kind != "event" {
				st.Skipped++
				continue
			}
			canonical, sum, err := canon.CanonicalizeDigest(s.Envelope)
			if err != nil {
				return st, fmt.Errorf("rebuild source %s: %w", s.ID, err)
			}
			if sum != s.EnvelopeSHA256 {
				return st, fmt.Errorf("rebuild source %s: envelope does not hash to its digest", s.ID)
			}
			ev, err := parseEnvelope(canonical)
			if err != nil {
				return st, fmt.Errorf("rebuild source %s: %w", s.ID, err)
			}
			if !c.supported[ev.Key()] {
				st.Skipped++
				continue
			}
			// what a delivery to this consumer's destination would carry, without attempt or lease
			ev.Canonical, ev.EnvelopeSHA256 = canonical, sum
			ev.Delivery = wire.Delivery{Destination: c.cfg.Destination, ConsumerName: c.cfg.ConsumerName, EventID: ev.EventID,
				Envelope: canonical, EnvelopeDigestAlgorithmVersion: "jcs-sha256-v1", EnvelopeSHA256: sum,
				RequiredProjectionName: c.cfg.ProjectionName, RequiredProjectionVersion: c.cfg.ProjectionVersion}
			_, wait, err := c.rebuildOne(ctx, ev, &st)
			if err != nil {
				return st, err
			}
			if wait {
				waiting = append(waiting, ev)
			}
		}
		if err := retry(); err != nil {
			return st, err
		}
	}
	if err := retry(); err != nil {
		return st, err
	}
	st.Waiting = len(waiting)
	return st, nil
}

// rebuildOne applies one event under the shadow version: done (applied or applied before),
// wait (an earlier revision of its aggregate is missing), or an error for any other answer.
func (c *Consumer) rebuildOne(ctx context.Context, ev Event, st *RebuildStats) (done, wait bool, err error) {
	var r wire.Result
	for try := 0; try < 5; try++ {
		st.Attempts++
		r = c.handle(ctx, ev)
		switch {
		case r.Status == wire.Acknowledged:
			st.Applied++
			return true, false, nil
		case r.Status == wire.Retryable && r.Code == CodeAwaitingRevision:
			return false, true, nil
		case r.Status == wire.NonRetryable:
			st.Refused = append(st.Refused, ev.EventID)
			return true, false, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return false, false, fmt.Errorf("rebuild of event %s: %s %s (retried)", ev.EventID, r.Code, r.Ref)
}
