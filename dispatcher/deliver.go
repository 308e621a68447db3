package dispatcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// job is one claimed delivery being handled.
type job struct {
	r         pgcall.ClaimedDelivery
	fence     pgcall.Fence
	log       *slog.Logger
	leaseEnds time.Time // local estimate of the lease's end, moved by each renewal
	mu        sync.Mutex
	// running: counted in Dispatcher.delivering (touched by the job's own goroutine only).
	running bool
	// elapsed: the transport call's duration, observed with the kernel's verdict on an ack.
	elapsed time.Duration
	// releaseSlot gives back the job's claim capacity (once); early: it did so when it handed
	// its outcome over, and is counted in Dispatcher.awaiting until it ends.
	releaseSlot func()
	early       bool
}

func (j *job) leaseDeadline() time.Time { j.mu.Lock(); defer j.mu.Unlock(); return j.leaseEnds }

func (d *Dispatcher) handle(r pgcall.ClaimedDelivery, claimedAt time.Time, release func()) {
	j := &job{
		r:           r,
		fence:       pgcall.Fence{Destination: r.Destination, EventID: r.EventID, AttemptID: r.AttemptID, LeaseToken: r.LeaseToken},
		log:         withTraceLog(d.log.With("destination", r.Destination, "event_id", r.EventID, "attempt", r.AttemptNumber), r),
		leaseEnds:   claimedAt.Add(d.cfg.Lease),
		running:     true,
		releaseSlot: release,
	}
	defer func() {
		if d.leave(j) { // ended without an outcome (fenced, aborted): groups need not wait for it
			d.kickAll(nil)
		}
		if j.early {
			d.awaiting.Add(-1)
		}
	}()
	// R-DP-1: verify the envelope outside any transaction; never deliver a mismatch.
	delivery, code := Verify(r)
	if code != "" {
		j.log.Warn("envelope verification failed; quarantining", "error_code", code)
		d.quarantineRef(j, code, "")
		return
	}

	dctx, cancel := context.WithCancel(d.hard)
	defer cancel()
	var fenced atomic.Bool
	renewDone := make(chan struct{})
	var renewWG sync.WaitGroup
	var renewTimer *time.Timer
	if d.cfg.LeaseRenewal {
		// No goroutine until the first renewal is due: most deliveries finish well before.
		renewWG.Add(1)
		renewTimer = time.AfterFunc(d.renewEvery(), func() { defer renewWG.Done(); d.renewLoop(j, renewDone, cancel, &fenced) })
	}
	stopRenewal := func() {
		close(renewDone)
		if renewTimer != nil && renewTimer.Stop() {
			renewWG.Done() // the renewal never started
		}
		renewWG.Wait()
	}
	// A delivery claimed ahead waits here for a transport slot (its destination's, then the
	// global one), its lease renewed meanwhile like a slow delivery's.
	if !d.acquireSend(dctx, r.Destination) {
		stopRenewal()
		if fenced.Load() {
			j.log.Warn("lease lost while waiting for a transport slot (renewal fenced off); dropping: another worker owns it now")
			return
		}
		d.abandoned.Add(1)
		j.log.Warn("delivery aborted by shutdown before its transport call; left to lease expiry")
		return
	}
	tr := d.transports[r.Destination]
	d.inTransport.Add(1)
	began := time.Now()
	res, err := d.deliverTraced(dctx, tr, delivery)
	elapsed := time.Since(began)
	d.inTransport.Add(-1)
	d.releaseSend(r.Destination)
	// Renewal stops before the outcome is handed over: an outcome waits at most
	// outcome_flush_interval (≤ 50 ms) plus one call, far inside any lease (≥ 1 s), and once it
	// is recorded the lease is gone (a renewal then would only be fenced off).
	stopRenewal()

	if fenced.Load() {
		j.log.Warn("lease lost during delivery (renewal fenced off); dropping: another worker owns it now")
		return
	}
	if d.hard.Err() != nil {
		// Grace ran out mid-delivery: record nothing, leave it to lease expiry (R-DP-3).
		d.abandoned.Add(1)
		j.log.Warn("delivery aborted by shutdown; left to lease expiry")
		return
	}
	j.elapsed = elapsed
	if err != nil {
		// The only transport errors: no consumer answer at all (network failure or timeout, R-DP-4).
		code := classifyTransportError(err)
		d.m.TransportErrors.WithLabelValues(r.Destination, code).Inc()
		d.observe(j, "transport_error")
		j.log.Info("transport failed; retrying", "error_code", code, "error", safeErr(err))
		d.retry(j, code, "")
		return
	}
	res = d.codes.Load().Normalize(res)
	switch res.Status {
	case wire.Acknowledged:
		// Observed by ack with the kernel's verdict (acknowledged | ack_rejected | ack_unrecorded).
		d.hook(HookAfterDeliver) // T-3, R-AK-8: receipt committed, ack not recorded
		d.ack(j, res)
	case wire.Retryable:
		d.observe(j, "retryable")
		d.retry(j, res.Code, res.Ref)
	case wire.NonRetryable:
		d.observe(j, "non_retryable")
		d.quarantineRef(j, res.Code, res.Ref)
	}
}

// Verify checks the claimed envelope against its stored digest and returns the delivery or a
// non-retryable code (R-DP-1, D-2, P-5).
//
// When the claim carries the canonical envelope text the producer's database verified (or
// computed) at append, sha256 of those bytes equal to the stored digest is the whole proof: the
// bytes are delivered as they are, never re-canonicalized. The database checked at append that
// the text is canonical and parses to exactly the envelope it stored (whose event id, type and
// schema version are the row's), and those columns are immutable (R-SEC-3); the audit sweep
// outbox.verify_event_digests re-canonicalizes them. Only a row without that text (written
// outside append_event) is canonicalized here with internal/canon, and its identity compared
// with the claimed row.
func Verify(r pgcall.ClaimedDelivery) (wire.Delivery, string) {
	if r.EventEnvelopeDigestAlgorithmVersion != canon.Algorithm {
		return wire.Delivery{}, transport.CodeUnsupportedSchema
	}
	var c []byte
	if r.EventEnvelopeCanonical != nil {
		if !sha256Is(r.EventEnvelopeCanonical, r.EventEnvelopeSHA256) {
			return wire.Delivery{}, transport.CodeDigestConflict
		}
		c = r.EventEnvelopeCanonical
	} else {
		var err error
		if c, err = canon.Canonicalize(r.EventEnvelope); err != nil {
			return wire.Delivery{}, transport.CodeEnvelopeInvalid
		}
		if !sha256Is(c, r.EventEnvelopeSHA256) {
			return wire.Delivery{}, transport.CodeDigestConflict
		}
		var id struct {
			EventID            string `json:"eventId"`
			EventType          string `json:"eventType"`
			EventSchemaVersion string `json:"eventSchemaVersion"`
		}
		if err := json.Unmarshal(c, &id); err != nil || !strings.EqualFold(id.EventID, r.EventID) ||
			id.EventType != r.EventType || id.EventSchemaVersion != r.EventSchemaVersion {
			return wire.Delivery{}, transport.CodeEnvelopeInvalid
		}
	}
	d := wire.Delivery{
		Destination: r.Destination, ConsumerName: r.ConsumerName, EventID: r.EventID, AttemptID: r.AttemptID,
		AttemptNumber: r.AttemptNumber, ExpectedReceiptType: r.ExpectedReceiptType,
		ExpectedReceiptSchemaVersion: r.ExpectedReceiptSchemaVersion, Envelope: c,
		EnvelopeDigestAlgorithmVersion: r.EventEnvelopeDigestAlgorithmVersion, EnvelopeSHA256: r.EventEnvelopeSHA256,
		TraceParent: r.TraceParent, TraceState: r.TraceState,
	}
	if r.RequiredProjectionName != nil {
		d.RequiredProjectionName = *r.RequiredProjectionName
	}
	if r.RequiredProjectionVersion != nil {
		d.RequiredProjectionVersion = *r.RequiredProjectionVersion
	}
	return d, ""
}

// sha256Is reports whether sha256(b) is the 64 lower-case hex digits want.
func sha256Is(b []byte, want string) bool {
	sum := sha256.Sum256(b)
	var h [64]byte
	hex.Encode(h[:], sum[:])
	return string(h[:]) == want
}

func safeDeliver(ctx context.Context, t transport.Transport, d wire.Delivery) (res wire.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("transport panicked: %v", p)
		}
	}()
	return t.Deliver(ctx, d)
}

// acquireSend takes a transport slot of dest, then one of the global concurrency; false when
// ctx ended first (shutdown grace over, or the lease was lost).
func (d *Dispatcher) acquireSend(ctx context.Context, dest string) bool {
	ds := d.destSlots[dest]
	if ds != nil {
		select {
		case ds <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case d.sendSlots <- struct{}{}:
		return true
	case <-ctx.Done():
		if ds != nil {
			<-ds
		}
		return false
	}
}

func (d *Dispatcher) releaseSend(dest string) {
	<-d.sendSlots
	if ds := d.destSlots[dest]; ds != nil {
		<-ds
	}
}

// classifyTransportError maps a transport failure to its normalized retryable code.
func classifyTransportError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return transport.CodeConsumerTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return transport.CodeConsumerTimeout
	}
	return transport.CodeTransportError
}
