// Package dispatcher is the thin delivery loop of SPEC §8 (R-DP-1..R-DP-6): claim a batch
// through outbox.claim_deliveries, verify each envelope's digest outside any transaction, deliver
// with bounded concurrency through the destination's transport, and record the classified
// outcome with ack_deliveries / retry_deliveries / quarantine_deliveries, grouping the outcomes
// of deliveries that finish close together into one call (R-AK-9, outcomes.go). It never writes
// a table and never re-implements a rule the SQL enforces: every state change is a fenced kernel
// call (internal/pgcall), each item fenced on its own, and anything the kernel refuses is
// treated as the kernel says.
package dispatcher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/failpoint"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/tracing"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// Options are what a Dispatcher runs with.
type Options struct {
	Config *config.Config
	// Pool runs every kernel call (claims, outcomes, renewals, recovery, stats).
	Pool *pgxpool.Pool
	// ListenConfig is the connection used for LISTEN; nil derives it from Pool's config.
	ListenConfig *pgx.ConnConfig
	// Transports holds one transport per configured destination (transport.Build).
	Transports map[string]transport.Transport
	Metrics    *metrics.Metrics
	Logger     *slog.Logger
	// TracerProvider makes the delivery spans (R-DP-7); nil: the global OpenTelemetry provider.
	TracerProvider trace.TracerProvider
}

// Dispatcher runs the loop. Create with New, check with Preflight, run with Run.
type Dispatcher struct {
	cfg        *config.Config
	pool       *pgxpool.Pool
	listenCfg  *pgx.ConnConfig
	transports map[string]transport.Transport
	m          *metrics.Metrics
	log        *slog.Logger
	tracer     trace.Tracer
	dests      []string
	destSet    map[string]bool

	wake      chan struct{}
	slotFreed chan struct{}
	// dbSlots bounds concurrent outcome and renewal calls to the pool size minus two, so that a
	// burst of outcomes waits here (not inside its statement timeout) and claims, recovery and
	// stats always find a connection.
	dbSlots  chan struct{}
	inflight atomic.Int64
	// delivering counts the claimed deliveries that have not yet handed over their outcome
	// (verifying or in the transport): while it is 0 no outcome group can grow, so an open group
	// is recorded at once instead of waiting for outcome_flush_interval.
	delivering atomic.Int64
	// Pipeline (issue 21 item 1): up to concurrency + prefetch deliveries are claimed and not
	// finished at once (the next batch is claimed while the current one is in flight); at most
	// concurrency of them are in a transport call (sendSlots), at most the destination's
	// concurrency per destination (destSlots). claimedBy counts each destination's claimed,
	// unfinished deliveries: a destination with a full queue is left out of the next claim.
	prefetch    int
	sendSlots   chan struct{}
	destSlots   map[string]chan struct{}
	claimedBy   map[string]*atomic.Int64
	inTransport atomic.Int64
	out         outcomeBatchers
	wg          sync.WaitGroup
	// hard is cancelled when the shutdown grace has run out: in-flight transport calls abort and
	// their deliveries are left to lease expiry.
	hard       context.Context
	hardCancel context.CancelFunc
	abandoned  atomic.Int64
	// The database's catalogs, loaded by Preflight (or Run, when Preflight was skipped): the
	// normalized error codes (outbox.error_codes, SPEC R-AK-7) every consumer answer is checked
	// against, and the receipt kinds (SPEC §13) for receipt digest candidates and broker receipts.
	codes    atomic.Pointer[transport.Codes]
	receipts atomic.Pointer[receipt.Catalog]
}

// New checks the options and returns a Dispatcher.
func New(o Options) (*Dispatcher, error) {
	if o.Config == nil || o.Pool == nil {
		return nil, errors.New("dispatcher: Config and Pool are required")
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	lc := o.ListenConfig
	if lc == nil {
		lc = o.Pool.Config().ConnConfig.Copy()
	}
	d := &Dispatcher{
		cfg: o.Config, pool: o.Pool, listenCfg: lc, transports: o.Transports, m: o.Metrics, log: o.Logger,
		dests: o.Config.DestinationNames(), destSet: map[string]bool{},
		wake: make(chan struct{}, 1), slotFreed: make(chan struct{}, 1),
		dbSlots:   make(chan struct{}, max(1, o.Config.DBMaxConns-2)),
		sendSlots: make(chan struct{}, max(1, o.Config.Concurrency)),
		destSlots: map[string]chan struct{}{}, claimedBy: map[string]*atomic.Int64{},
	}
	d.tracer = tracing.Tracer(o.TracerProvider)
	// Claiming ahead needs lease renewal: a claimed delivery waiting for a transport slot keeps
	// its lease only by renewing it.
	if o.Config.LeaseRenewal {
		d.prefetch = o.Config.Prefetch
	}
	for _, n := range d.dests {
		if d.transports[n] == nil {
			return nil, fmt.Errorf("dispatcher: no transport for destination %s", n)
		}
		d.destSet[n] = true
		d.destSlots[n] = make(chan struct{}, max(1, o.Config.DestinationConcurrency(n)))
		d.claimedBy[n] = new(atomic.Int64)
		// Zero-valued series exist from the start, so alerts see 0 rather than "no data".
		for _, op := range []string{"renew", "ack", "retry", "quarantine"} {
			d.m.FencingRejections.WithLabelValues(n, op)
		}
		for _, code := range []string{transport.CodeTransportError, transport.CodeConsumerTimeout} {
			d.m.TransportErrors.WithLabelValues(n, code)
		}
		for _, st := range []string{"OB002", "OB201"} {
			d.m.AckRejections.WithLabelValues(n, st)
		}
	}
	for _, op := range []string{"ack", "retry", "quarantine"} {
		d.m.OutcomeBatchSize.WithLabelValues(op)
	}
	d.newBatchers()
	d.hard, d.hardCancel = context.WithCancel(context.Background())
	return d, nil
}

// Metrics returns the dispatcher's collectors.
func (d *Dispatcher) Metrics() *metrics.Metrics { return d.m }

var errShutdown = errors.New("shutdown grace expired before the outcome could be recorded")

// ErrNoActiveDeliverySet is returned by Preflight and Ready when no delivery set is active.
var ErrNoActiveDeliverySet = errors.New("no active delivery set (register and activate one first; R-DP-6)")

// loadCatalogs reads the error codes and the receipt kinds from the database and hands them to
// the transports that use them (HTTP classifies error answers, JetStream builds receipts). A kind or code registered
// later is known after the next Preflight (a restart).
func (d *Dispatcher) loadCatalogs(ctx context.Context) error {
	codes, err := transport.LoadCodes(ctx, d.pool)
	if err != nil {
		return err
	}
	receipts, err := receipt.LoadCatalog(ctx, d.pool)
	if err != nil {
		return err
	}
	d.codes.Store(codes)
	d.receipts.Store(receipts)
	for _, t := range d.transports {
		if u, ok := t.(transport.ReceiptCatalogUser); ok {
			u.SetReceiptCatalog(receipts)
		}
		if u, ok := t.(transport.CodesUser); ok {
			u.SetCodes(codes)
		}
	}
	return nil
}

// Codes returns the error codes loaded by Preflight (nil before).
func (d *Dispatcher) Codes() *transport.Codes { return d.codes.Load() }

// Preflight refuses an unsafe start (R-DP-6): no active delivery set, a configured destination
// the database does not know, or a JetStream destination whose receipt kind is not
// broker_publication (and the converse). It loads the error codes and receipt kinds the loop
// uses from the database (issue 34).
func (d *Dispatcher) Preflight(ctx context.Context) error {
	if err := d.loadCatalogs(ctx); err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	if _, err := pgcall.ActiveDeliverySet(ctx, d.pool); err != nil {
		if errors.Is(err, pgcall.ErrNoActiveDeliverySet) {
			return ErrNoActiveDeliverySet
		}
		return fmt.Errorf("preflight: %w", err)
	}
	stats, err := pgcall.DeliveryStats(ctx, d.pool)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	kinds := map[string]string{}
	for _, s := range stats {
		kinds[s.Destination] = s.ReceiptKind
	}
	var problems []string
	for _, n := range d.dests {
		kind, ok := kinds[n]
		if !ok {
			problems = append(problems, fmt.Sprintf("destination %s is not registered in outbox.delivery_destinations", n))
			continue
		}
		isJS := d.cfg.Destinations[n].Transport == config.TransportJetStream
		if isJS && kind != transport.BrokerReceiptKind {
			problems = append(problems, fmt.Sprintf("destination %s uses transport jetstream but its receipt kind is %s, not %s", n, kind, transport.BrokerReceiptKind))
		}
		if !isJS && kind == transport.BrokerReceiptKind {
			problems = append(problems, fmt.Sprintf("destination %s has receipt kind %s: only the jetstream transport builds broker receipts", n, kind))
		}
	}
	if len(problems) > 0 {
		return errors.New("preflight refused: " + strings.Join(problems, "; "))
	}
	return nil
}

// Ready reports whether the database is reachable and a delivery set is active (/readyz). The
// error text is safe to show: it never carries a connection string.
func (d *Dispatcher) Ready(ctx context.Context) error {
	if _, err := pgcall.ActiveDeliverySet(ctx, d.pool); err != nil {
		if errors.Is(err, pgcall.ErrNoActiveDeliverySet) {
			return ErrNoActiveDeliverySet
		}
		return errors.New("database unreachable")
	}
	return nil
}

// DrainError is returned by Run when the shutdown grace ran out with deliveries in flight; those
// were left to lease expiry (nothing was recorded for them).
type DrainError struct{ Abandoned int64 }

func (e *DrainError) Error() string {
	return fmt.Sprintf("shutdown grace expired: %d in-flight deliveries left to lease expiry", e.Abandoned)
}

// Run claims and delivers until ctx is cancelled, then drains (R-DP-3): it stops claiming, waits
// up to the shutdown grace for in-flight deliveries to finish and be recorded, then aborts the
// rest without recording anything for them (their leases expire; recovery and re-delivery
// follow, R-AK-8). It returns nil after a clean drain, *DrainError otherwise.
func (d *Dispatcher) Run(ctx context.Context) error {
	if d.codes.Load() == nil || d.receipts.Load() == nil {
		lctx, cancel := context.WithTimeout(ctx, d.cfg.StatementTimeout+5*time.Second)
		err := d.loadCatalogs(lctx)
		cancel()
		if err != nil {
			return fmt.Errorf("dispatcher: %w", err)
		}
	}
	bg, bgCancel := context.WithCancel(context.Background())
	var aux sync.WaitGroup
	aux.Add(3)
	go func() { defer aux.Done(); d.listenLoop(mergeDone(bg, ctx)) }()
	go func() { defer aux.Done(); d.recoveryLoop(mergeDone(bg, ctx)) }()
	go func() { defer aux.Done(); d.statsLoop(bg) }()

	d.log.Info("dispatcher started", "worker", d.cfg.WorkerName, "destinations", d.dests,
		"concurrency", d.cfg.Concurrency, "batch_size", d.cfg.BatchSize, "lease", d.cfg.Lease.String(),
		"lease_renewal", d.cfg.LeaseRenewal, "mode", d.cfg.Mode)
	d.claimLoop(ctx)

	n := d.inflight.Load()
	d.log.Info("draining: claiming stopped", "inflight", n, "shutdown_grace", d.cfg.ShutdownGrace.String())
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	var result error
	grace := time.NewTimer(d.cfg.ShutdownGrace)
	select {
	case <-done:
		grace.Stop()
	case <-grace.C:
		left := d.inflight.Load()
		d.hardCancel()
		<-done
		result = &DrainError{Abandoned: d.abandoned.Load()}
		d.log.Warn("shutdown grace expired", "left_to_lease_expiry", d.abandoned.Load(), "inflight_at_deadline", left)
	}
	d.hardCancel()
	bgCancel()
	aux.Wait()
	d.log.Info("dispatcher stopped", "clean", result == nil)
	return result
}

// mergeDone returns a context cancelled when either a or b is done.
func mergeDone(a, b context.Context) context.Context {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	go func() { <-ctx.Done(); stop() }()
	return ctx
}

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
		failpoint.Inject(failpoint.BeforeClaim) // T-3 crash window (test-only; no-op otherwise)
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
			failpoint.Inject(failpoint.AfterClaim) // T-3: claimed, no consumer called yet
			if d.inTransport.Load() > 0 && d.out.pending() > 0 {
				// T-3, issue 21: a batch claimed while earlier deliveries are in the transport and
				// an outcome group waits for its flush.
				failpoint.Inject(failpoint.PipelinedClaim)
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
		defer func() {
			if claimed != nil {
				claimed.Add(-1)
			}
			d.inflight.Add(-1)
			d.m.InFlight.Dec()
			d.wg.Done()
			select {
			case d.slotFreed <- struct{}{}:
			default:
			}
		}()
		d.handle(r, claimedAt)
	}()
}

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
}

func (j *job) leaseDeadline() time.Time { j.mu.Lock(); defer j.mu.Unlock(); return j.leaseEnds }

func (d *Dispatcher) handle(r pgcall.ClaimedDelivery, claimedAt time.Time) {
	j := &job{
		r:         r,
		fence:     pgcall.Fence{Destination: r.Destination, EventID: r.EventID, AttemptID: r.AttemptID, LeaseToken: r.LeaseToken},
		log:       withTraceLog(d.log.With("destination", r.Destination, "event_id", r.EventID, "attempt", r.AttemptNumber), r),
		leaseEnds: claimedAt.Add(d.cfg.Lease),
		running:   true,
	}
	defer func() {
		if d.leave(j) { // ended without an outcome (fenced, aborted): groups need not wait for it
			d.kickAll(nil)
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
		failpoint.Inject(failpoint.AfterDeliver) // T-3, R-AK-8: receipt committed, ack not recorded
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

func (d *Dispatcher) ack(j *job, res wire.Result) {
	// D-2 receipt hot path: the receipt's digest candidate, canonicalized here, spares the
	// database its PL/pgSQL canonicalization (it still checks the candidate against the receipt
	// and falls back to canonicalizing itself when it is not exactly that).
	item := pgcall.AckItem{Fence: j.fence, Ack: res.Ack, Receipt: res.Receipt}
	if _, cand, err := d.receipts.Load().DigestCandidate(res.Receipt); err == nil {
		item.ReceiptDigestCandidate = string(cand)
	}
	one := func(ctx context.Context) (string, error) {
		return pgcall.AckDelivery(ctx, d.pool, j.fence, res.Ack, res.Receipt, item.ReceiptDigestCandidate)
	}
	var outcome string
	var err error
	if batchable(item) {
		outcome, err = record(d, j, d.out.acks, item, one)
	} else {
		// Documents a batch could not carry (not JSON, or holding \u0000) would fail the whole
		// batch: recorded alone, where the kernel refuses them as before.
		outcome, err = d.recordSingle(j, "ack", one)
	}
	switch {
	case err == nil:
		d.observe(j, "acknowledged")
		failpoint.Inject(failpoint.AfterAck) // T-3: ack committed
		d.m.Acks.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, outcome).Inc()
		j.log.Debug("acknowledged", "publication", outcome)
	case errors.Is(err, pgcall.ErrFencingRejected):
		d.observe(j, "ack_unrecorded")
		d.fenced(j, "ack")
	case isDocumentRejection(err):
		// The consumer answered something the kernel refuses (OB002, OB201, malformed JSON):
		// never acknowledged; retried as invalid_ack. Not a transport error: the consumer
		// answered; the kernel refused what it said.
		d.observe(j, "ack_rejected")
		d.m.AckRejections.WithLabelValues(j.r.Destination, pgcall.SQLState(err)).Inc()
		j.log.Warn("ack rejected by the kernel; retrying as invalid_ack", "sqlstate", pgcall.SQLState(err))
		d.retry(j, transport.CodeInvalidAck, "ack_rejected:"+pgcall.SQLState(err))
	default:
		d.observe(j, "ack_unrecorded")
		j.log.Error("ack not recorded; left to lease expiry", "error", safeErr(err), "sqlstate", pgcall.SQLState(err))
	}
}

// refPtr is the sanitized ref for an outcome call, nil when none survives (dropped whole when it
// breaks the ref rule).
func refPtr(ref string) *string {
	if ref = transport.SanitizeRef(ref); ref != "" {
		return &ref
	}
	return nil
}

func (d *Dispatcher) retry(j *job, code, ref string) {
	refp := refPtr(ref)
	state, err := record(d, j, d.out.retries, pgcall.RetryItem{Fence: j.fence, ErrorCode: code, ErrorRef: refp},
		func(ctx context.Context) (string, error) {
			return pgcall.RetryDelivery(ctx, d.pool, j.fence, code, refp)
		})
	switch {
	case err == nil:
		d.m.Retries.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, code, state).Inc()
		if state == "quarantined" {
			d.m.Quarantines.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, "retry_exhausted").Inc()
			j.log.Warn("retries exhausted; quarantined", "error_code", code)
		} else {
			j.log.Debug("retry scheduled", "error_code", code)
		}
	case errors.Is(err, pgcall.ErrFencingRejected):
		d.fenced(j, "retry")
	default:
		j.log.Error("retry not recorded; left to lease expiry", "error_code", code, "error", safeErr(err), "sqlstate", pgcall.SQLState(err))
	}
}

// observe records the consumer call's duration under the outcome that counts (R-DP-4): for a
// 200 answer the kernel's verdict on the ack, otherwise the answer's class.
func (d *Dispatcher) observe(j *job, outcome string) {
	d.m.DeliveryLatency.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, outcome).Observe(j.elapsed.Seconds())
}

// quarantineRef quarantines with reason = error_code = code and keeps the consumer's ref
// (sanitized; dropped whole when it breaks the ref rule) on the finish (R-AK-6, R-AK-7).
func (d *Dispatcher) quarantineRef(j *job, code, ref string) {
	refp := refPtr(ref)
	_, err := record(d, j, d.out.quarantines, pgcall.QuarantineItem{Fence: j.fence, Reason: code, ErrorCode: code, ErrorRef: refp},
		func(ctx context.Context) (string, error) {
			return "quarantined", pgcall.QuarantineDelivery(ctx, d.pool, j.fence, code, code, refp)
		})
	switch {
	case err == nil:
		d.m.Quarantines.WithLabelValues(j.r.Destination, j.r.EventType, j.r.EventSchemaVersion, code).Inc()
		j.log.Warn("quarantined", "error_code", code)
	case errors.Is(err, pgcall.ErrFencingRejected):
		d.fenced(j, "quarantine")
	default:
		j.log.Error("quarantine not recorded; left to lease expiry", "error_code", code, "error", safeErr(err), "sqlstate", pgcall.SQLState(err))
	}
}

// batchable reports whether an ack item's documents can travel inside a batch document: JSON,
// and without \u0000 (which PostgreSQL cannot store as jsonb: the whole call would fail with
// OB201). A receipt with a candidate was canonicalized by internal/canon, which refuses both.
func batchable(it pgcall.AckItem) bool {
	return it.ReceiptDigestCandidate != "" && json.Valid(it.Ack) && !bytes.Contains(it.Ack, []byte(`\u0000`))
}

func (d *Dispatcher) fenced(j *job, op string) {
	d.m.FencingRejections.WithLabelValues(j.r.Destination, op).Inc()
	j.log.Warn("outcome fenced off: the lease is no longer ours; dropped", "operation", op)
}

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
