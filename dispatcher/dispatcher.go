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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/receipt"
	"github.com/oceanway/pgoutbox/tracing"
	"github.com/oceanway/pgoutbox/transport"
)

// Config is the dispatcher's whole configuration (the TOML file of docs/dispatcher.md, with
// PGOUTBOX_* overrides and the destinations' secrets): read it with LoadConfig or ParseConfig,
// or start from DefaultConfig and fill it in (then call its Validate).
type Config = config.Config

// Destination is one configured destination of a Config.
type Destination = config.Destination

// Env looks up an environment variable (os.LookupEnv, or a map in tests).
type Env = config.Env

// LoadConfig reads the TOML file at path, applies PGOUTBOX_* overrides from env (nil:
// os.LookupEnv), loads the secrets the destinations name and validates everything; the error
// lists every violation at once.
func LoadConfig(path string, env Env) (*Config, error) { return config.Load(path, env) }

// ParseConfig is LoadConfig on the file's text.
func ParseConfig(text string, env Env) (*Config, error) { return config.Parse(text, env) }

// DefaultConfig returns the defaults every configuration starts from (no destination).
func DefaultConfig() Config { return config.Defaults() }

// Options are what a Dispatcher runs with besides its pool and configuration. All are optional
// except Transports.
type Options struct {
	// Transports holds one transport per configured destination: the built-in ones from
	// transport.Build, and the program's own for destinations configured with transport =
	// "custom" (any transport.Transport).
	Transports map[string]transport.Transport
	// ListenConfig is the connection used for LISTEN; nil derives it from the pool's config.
	ListenConfig *pgx.ConnConfig
	// Metrics are the collectors the dispatcher updates; nil creates a fresh set (Metrics).
	Metrics *metrics.Metrics
	// Logger receives the dispatcher's structured log; nil uses slog.Default().
	Logger *slog.Logger
	// Hook, when set, is called at each hook point (hooks.go). Only tests set it.
	Hook func(point string)
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
	hookFn     func(point string)
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
	// awaiting counts the deliveries that handed their outcome over and gave back their place in
	// the pipeline before it was recorded (leave).
	awaiting atomic.Int64
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

// New returns a Dispatcher that runs kernel calls on pool (as a role with the dispatcher's
// grants) with the configuration cfg and the options o. It checks that every configured
// destination has a transport; Preflight then checks the database.
func New(pool *pgxpool.Pool, cfg *Config, o Options) (*Dispatcher, error) {
	if cfg == nil || pool == nil {
		return nil, errors.New("dispatcher: pool and config are required")
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	lc := o.ListenConfig
	if lc == nil {
		lc = pool.Config().ConnConfig.Copy()
	}
	d := &Dispatcher{
		cfg: cfg, pool: pool, listenCfg: lc, transports: o.Transports, m: o.Metrics, log: o.Logger, hookFn: o.Hook,
		dests: cfg.DestinationNames(), destSet: map[string]bool{},
		wake: make(chan struct{}, 1), slotFreed: make(chan struct{}, 1),
		dbSlots:   make(chan struct{}, max(1, cfg.DBMaxConns-2)),
		sendSlots: make(chan struct{}, max(1, cfg.Concurrency)),
		destSlots: map[string]chan struct{}{}, claimedBy: map[string]*atomic.Int64{},
	}
	d.tracer = tracing.Tracer(o.TracerProvider)
	// Claiming ahead needs lease renewal: a claimed delivery waiting for a transport slot keeps
	// its lease only by renewing it.
	if cfg.LeaseRenewal {
		d.prefetch = cfg.Prefetch
	}
	for _, n := range d.dests {
		if d.transports[n] == nil {
			return nil, fmt.Errorf("dispatcher: no transport for destination %s", n)
		}
		d.destSet[n] = true
		d.destSlots[n] = make(chan struct{}, max(1, cfg.DestinationConcurrency(n)))
		d.claimedBy[n] = new(atomic.Int64)
		// Zero-valued series exist from the start, so alerts see 0 rather than "no data".
		d.m.FencingRejections.WithLabelValues(n, "renew")
		for _, k := range outcomeKinds {
			d.m.FencingRejections.WithLabelValues(n, k.op)
		}
		for _, code := range []string{transport.CodeTransportError, transport.CodeConsumerTimeout} {
			d.m.TransportErrors.WithLabelValues(n, code)
		}
		for _, st := range []string{"OB002", "OB201"} {
			d.m.AckRejections.WithLabelValues(n, st)
		}
	}
	for _, k := range outcomeKinds {
		d.m.OutcomeBatchSize.WithLabelValues(k.op)
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
// the transports that ask for them (transport.Prepare). A kind or code registered later is known
// after the next Preflight (a restart).
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
		transport.Prepare(t, codes, receipts)
	}
	return nil
}

// Codes returns the error codes loaded by Preflight (nil before).
func (d *Dispatcher) Codes() *transport.Codes { return d.codes.Load() }

// Preflight refuses an unsafe start (R-DP-6): no active delivery set, a configured destination
// the database does not know, or a destination whose receipt kind its transport cannot answer
// with: a transport that builds the receipts itself (transport.ReceiptBuilder, e.g. JetStream's
// broker receipts) must serve a destination of exactly that kind, and a kind that only such a
// transport builds needs one. It loads the error codes and receipt kinds the loop uses from the
// database (issue 34).
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
		if p := transport.CheckReceiptKind(d.transports[n], kind); p != "" {
			problems = append(problems, fmt.Sprintf("destination %s: %s", n, p))
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
type DrainError struct {
	// Abandoned counts the deliveries left to lease expiry.
	Abandoned int64
}

// Error says how many deliveries were left to lease expiry.
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
