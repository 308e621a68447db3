// Package soak is the bounded soak of SPEC T-8 (issue "Proof under fire", item 4): several
// concurrent producers append a fixed number of events of the 13 reference event types through
// producer.Append, a dispatcher running in this process delivers them to the four reference
// consumers (each in its own database) over loopback HTTP with HMAC (or in process), transient
// failures are injected at the consumer side (before applying, and after the receipt commit —
// lost acks), and the dispatcher is stopped and restarted with a tiny shutdown grace while work
// is in flight, so leases are abandoned and must be recovered (R-AK-8). The run is bounded by
// its event count and its time limit, and ends with a machine-checked Report.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
	"github.com/oceanway/pgoutbox/transport"
)

// Transports the soak can run the dispatcher with.
const (
	TransportHTTP      = "http"
	TransportInProcess = "inprocess"
)

// Config of one soak run. ProducerDSN and ConsumerDSNs name migrated databases reachable as a
// superuser (the soak installs the reference release, the retry policies and the consumers'
// domain schemas itself); everything the system does runs as its real roles.
type Config struct {
	ProducerDSN  string
	ConsumerDSNs map[string]string // reference consumer name → its database

	// Events is the number of business events to append, rounded up to whole runs of 13
	// (Runs, when set, wins). One more event — the one the projector rejects — is appended
	// when Rejected is set.
	Events    int
	Runs      int
	Rejected  bool
	Producers int // concurrent producers (default 4)

	// FailureRate is the fraction of deliveries answered retryable consumer_unavailable before
	// the consumer applies anything; LostAckRate the fraction whose answer is lost after the
	// consumer committed its receipt (default FailureRate/5).
	FailureRate float64
	LostAckRate float64
	Seed        uint64

	// Restarts is the number of dispatcher stop/start cycles while work is in flight; each stop
	// cancels Run with RestartGrace (default 1ms) so in-flight deliveries are abandoned to lease
	// expiry and recovered by the next instance.
	Restarts     int
	RestartGrace time.Duration

	TimeLimit   time.Duration // default 20m
	Concurrency int           // dispatcher concurrency (default 32)
	BatchSize   int           // claim batch size (default 32)
	Lease       time.Duration // default 3s (short: abandoned leases come back quickly)
	DBMaxConns  int           // dispatcher pool (default 16)
	Transport   string        // TransportHTTP (default) or TransportInProcess

	ConsumerRole string       // role the consumer kits run their transactions as (default outbox_consumer)
	Logger       *slog.Logger // dispatcher and consumer logs (default: discarded)
	Progress     io.Writer    // progress lines (nil: none)
}

func (c *Config) defaults() error {
	if c.ProducerDSN == "" {
		return errors.New("soak: ProducerDSN is required")
	}
	for _, s := range reference.All() {
		if c.ConsumerDSNs[s.ConsumerName] == "" {
			return fmt.Errorf("soak: no database for consumer %s", s.ConsumerName)
		}
	}
	if c.Runs <= 0 {
		if c.Events <= 0 {
			return errors.New("soak: Events or Runs must be positive")
		}
		c.Runs = (c.Events + EventsPerRun - 1) / EventsPerRun
	}
	c.Events = c.Runs * EventsPerRun
	if c.Producers <= 0 {
		c.Producers = 4
	}
	c.Producers = min(c.Producers, c.Runs)
	if c.FailureRate < 0 || c.FailureRate >= 1 || c.LostAckRate < 0 || c.FailureRate+c.LostAckRate >= 1 {
		return errors.New("soak: failure rates must be in [0, 1)")
	}
	if c.LostAckRate == 0 {
		c.LostAckRate = c.FailureRate / 5
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.RestartGrace <= 0 {
		c.RestartGrace = time.Millisecond
	}
	if c.TimeLimit <= 0 {
		c.TimeLimit = 20 * time.Minute
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 32
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 32
	}
	if c.Lease <= 0 {
		c.Lease = 3 * time.Second
	}
	if c.DBMaxConns <= 0 {
		c.DBMaxConns = 16
	}
	if c.Transport == "" {
		c.Transport = TransportHTTP
	}
	if c.Transport != TransportHTTP && c.Transport != TransportInProcess {
		return fmt.Errorf("soak: transport %q: must be %s or %s", c.Transport, TransportHTTP, TransportInProcess)
	}
	if c.ConsumerRole == "" {
		c.ConsumerRole = "outbox_consumer"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

func (c *Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "  %s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// soakSecret authenticates the loopback HTTP deliveries (HMAC-SHA256); not a real credential.
const soakSecret = "soak-loopback-hmac-secret-0123456789"

type run struct {
	cfg    Config
	faults *faults

	mu        sync.Mutex
	appended  []string // event ids committed by the producers
	appendErr error

	restarts  int
	abandoned int64
	fenced    float64
	workers   []string
}

// Run performs one soak and returns its report. The error is for a soak that could not run
// (setup failed); a run that violates an invariant returns a report whose Check fails.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, faults: newFaults(cfg.FailureRate, cfg.LostAckRate, cfg.Seed)}
	return r.run(ctx)
}

func connectAs(ctx context.Context, dsn, role string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if role != "" {
		if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
			conn.Close(ctx)
			return nil, err
		}
	}
	return conn, nil
}

// prepare activates the reference release (unless a delivery set is active) and sets a fast
// retry policy on the four destinations, as outbox_registrar.
func (r *run) prepare(ctx context.Context) error {
	reg, err := connectAs(ctx, r.cfg.ProducerDSN, "outbox_registrar")
	if err != nil {
		return fmt.Errorf("connect as outbox_registrar: %w", err)
	}
	defer reg.Close(ctx)
	disp, err := connectAs(ctx, r.cfg.ProducerDSN, "outbox_dispatcher")
	if err != nil {
		return fmt.Errorf("connect as outbox_dispatcher: %w", err)
	}
	_, err = pgcall.ActiveDeliverySet(ctx, disp)
	disp.Close(ctx)
	if errors.Is(err, pgcall.ErrNoActiveDeliverySet) {
		doc, err := reference.LoadRelease()
		if err != nil {
			return err
		}
		q, err := pgcall.RegisterDeliverySet(ctx, reg, doc, reference.SourceRelease)
		if err != nil {
			return fmt.Errorf("register the reference release: %w", err)
		}
		if err := pgcall.ActivateDeliverySet(ctx, reg, q); err != nil {
			return fmt.Errorf("activate the reference release: %w", err)
		}
	} else if err != nil {
		return err
	}
	// Gaps (out-of-order revisions) and injected failures are retried quickly; the attempt bound
	// is high so that only a real defect can exhaust it.
	for _, s := range reference.All() {
		if _, err := reg.Exec(ctx, `SELECT outbox.set_retry_policy($1, interval '20 milliseconds', 2, interval '200 milliseconds', 0.2, 1000)`,
			s.Destination); err != nil {
			return fmt.Errorf("retry policy %s: %w", s.Destination, err)
		}
	}
	return nil
}

type consumers struct {
	pools map[string]*pgxpool.Pool
	trs   map[string]transport.Transport
	dests map[string]config.Destination
	srv   *httptest.Server
}

func (c *consumers) close() {
	for _, t := range c.trs {
		_ = t.Close()
	}
	if c.srv != nil {
		c.srv.Close()
	}
	for _, p := range c.pools {
		p.Close()
	}
}

// startConsumers installs the four reference consumers in their databases and serves them,
// each behind the fault injector.
func (r *run) startConsumers(ctx context.Context) (*consumers, error) {
	cs := &consumers{pools: map[string]*pgxpool.Pool{}, trs: map[string]transport.Transport{}, dests: map[string]config.Destination{}}
	mux := http.NewServeMux()
	kits := map[string]*consumer.Consumer{}
	for _, spec := range reference.All() {
		pc, err := pgxpool.ParseConfig(r.cfg.ConsumerDSNs[spec.ConsumerName])
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("consumer %s: bad database URL", spec.ConsumerName)
		}
		pc.MaxConns = 8
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			cs.close()
			return nil, err
		}
		cs.pools[spec.ConsumerName] = pool
		if err := spec.Install(ctx, pool, r.cfg.ConsumerRole); err != nil {
			cs.close()
			return nil, err
		}
		kit, err := spec.New(ctx, pool, func(c *consumer.Config) {
			c.Role = r.cfg.ConsumerRole
			c.HMACSecret = []byte(soakSecret)
			c.Logger = r.cfg.Logger
		})
		if err != nil {
			cs.close()
			return nil, err
		}
		kits[spec.Destination] = kit
		mux.Handle("/consumers/"+spec.ConsumerName, r.faults.wrapHandler(spec.Destination, kit))
	}
	if r.cfg.Transport == TransportHTTP {
		cs.srv = httptest.NewServer(mux)
	}
	for _, spec := range reference.All() {
		if r.cfg.Transport == TransportInProcess {
			cs.dests[spec.Destination] = config.Destination{Transport: config.TransportInProcess}
			cs.trs[spec.Destination] = transport.Func(r.faults.wrapConsumer(kits[spec.Destination]))
			continue
		}
		d := config.Destination{Transport: config.TransportHTTP, URL: cs.srv.URL + "/consumers/" + spec.ConsumerName,
			Timeout: 10 * time.Second, Auth: config.AuthHMAC, Secret: config.NewSecret([]byte(soakSecret)),
			SecretEnv: "PGOUTBOX_SOAK_SECRET", MaxResponseBytes: 1 << 20}
		h, err := transport.NewHTTP(transport.HTTPOptions{URL: d.URL, Timeout: d.Timeout, Auth: d.Auth, Secret: d.Secret,
			MaxResponseBytes: d.MaxResponseBytes})
		if err != nil {
			cs.close()
			return nil, err
		}
		cs.dests[spec.Destination] = d
		cs.trs[spec.Destination] = h
	}
	return cs, nil
}

// instance is one running dispatcher.
type instance struct {
	pool   *pgxpool.Pool
	m      *metrics.Metrics
	cancel context.CancelFunc
	done   chan error
}

func (r *run) dispatcherConfig(n int, dests map[string]config.Destination) *config.Config {
	c := config.Defaults()
	c.Mode = config.ModeProduction
	if r.cfg.Transport == TransportInProcess {
		c.Mode = config.ModeDevelopment
	}
	c.WorkerName = fmt.Sprintf("soak-dispatcher-%d", n)
	c.BatchSize = r.cfg.BatchSize
	c.Concurrency = r.cfg.Concurrency
	c.Lease = r.cfg.Lease
	c.StatementTimeout = min(5*time.Second, r.cfg.Lease*2/3)
	c.PollInterval = 200 * time.Millisecond
	c.RecoveryInterval = 250 * time.Millisecond
	c.ShutdownGrace = r.cfg.RestartGrace
	c.StatsInterval = 5 * time.Second
	c.DBMaxConns = r.cfg.DBMaxConns
	c.DatabaseRole = "outbox_dispatcher"
	c.MetricsAddress = "127.0.0.1:0"
	c.Destinations = dests
	return &c
}

func (r *run) startDispatcher(ctx context.Context, n int, cs *consumers) (*instance, error) {
	cfg := r.dispatcherConfig(n, cs.dests)
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("soak: dispatcher config invalid: %v", errs)
	}
	pc, err := dispatcher.PoolConfig(cfg, r.cfg.ProducerDSN)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	m := metrics.New()
	d, err := dispatcher.New(pool, cfg, dispatcher.Options{Transports: cs.trs, Metrics: m, Logger: r.cfg.Logger})
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := d.Preflight(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	dctx, cancel := context.WithCancel(context.Background())
	in := &instance{pool: pool, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- d.Run(dctx) }()
	r.workers = append(r.workers, cfg.WorkerName)
	return in, nil
}

// stop cancels the instance and waits for Run; it returns how many in-flight deliveries the
// drain abandoned to lease expiry.
func (r *run) stop(in *instance) int64 {
	in.cancel()
	err := <-in.done
	in.pool.Close()
	r.fenced += fencingRejections(in.m)
	var de *dispatcher.DrainError
	if errors.As(err, &de) {
		return de.Abandoned
	}
	return 0
}

func (r *run) recordAppended(ids []string) {
	r.mu.Lock()
	r.appended = append(r.appended, ids...)
	r.mu.Unlock()
}

// produce runs the producers; it returns when all are done (or ctx ends).
func (r *run) produce(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, r.cfg.Producers)
	per := r.cfg.Runs / r.cfg.Producers
	extra := r.cfg.Runs % r.cfg.Producers
	from := 1
	for p := 0; p < r.cfg.Producers; p++ {
		n := per
		if p < extra {
			n++
		}
		lo, hi := from, from+n
		from = hi
		wg.Add(1)
		go func(p, lo, hi int) {
			defer wg.Done()
			conn, err := connectAs(ctx, r.cfg.ProducerDSN, "outbox_producer")
			if err != nil {
				errs[p] = err
				return
			}
			defer conn.Close(context.Background())
			sp := scenario.Producer{Conn: conn, Prefix: fmt.Sprintf("p%02d", p), Workspace: "ws-soak", Committed: r.recordAppended}
			errs[p] = sp.Runs(ctx, lo, hi)
			if errs[p] == nil && p == 0 && r.cfg.Rejected {
				errs[p] = sp.Rejected(ctx, lo)
			}
		}(p, lo, hi)
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *run) run(ctx context.Context) (*Report, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.TimeLimit)
	defer cancel()
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	cs, err := r.startConsumers(ctx)
	if err != nil {
		return nil, err
	}
	defer cs.close()
	auditor, err := connectAs(ctx, r.cfg.ProducerDSN, "outbox_auditor")
	if err != nil {
		return nil, err
	}
	defer auditor.Close(context.Background())

	expectedDeliveries := int64(r.cfg.Runs * DeliveriesPerRun)
	if r.cfg.Rejected {
		expectedDeliveries++
	}
	r.cfg.progress("soak: %d events (%d runs) by %d producers, %s transport, failure rate %.3f + lost acks %.3f, %d restarts, limit %s",
		r.cfg.Events, r.cfg.Runs, r.cfg.Producers, r.cfg.Transport, r.cfg.FailureRate, r.cfg.LostAckRate, r.cfg.Restarts, r.cfg.TimeLimit)

	began := time.Now()
	n := 1
	cur, err := r.startDispatcher(ctx, n, cs)
	if err != nil {
		return nil, err
	}
	var producing atomic.Bool
	producing.Store(true)
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		err := r.produce(ctx)
		r.mu.Lock()
		r.appendErr = err
		r.mu.Unlock()
		producing.Store(false)
	}()
	var producedAt time.Duration

	// Restart i happens once i/(Restarts+1) of the expected deliveries were answered; progress
	// and termination are read from outbox.delivery_stats (non-terminal rows only).
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastPrint := time.Time{}
	timedOut := false
loop:
	for {
		select {
		case <-ctx.Done():
			timedOut = true
			break loop
		case <-tick.C:
		}
		if producedAt == 0 && !producing.Load() {
			producedAt = time.Since(began)
			r.mu.Lock()
			r.cfg.progress("producers done: %d events appended in %s", len(r.appended), producedAt.Round(time.Millisecond))
			r.mu.Unlock()
		}
		answered := r.faults.answered.Load() + r.faults.injectedLost.Load()
		if r.restarts < r.cfg.Restarts && answered >= int64(r.restarts+1)*expectedDeliveries/int64(r.cfg.Restarts+1) {
			ab := r.stop(cur)
			r.abandoned += ab
			r.restarts++
			n++
			r.cfg.progress("restart %d: dispatcher stopped with %s grace, %d in-flight deliveries abandoned to lease expiry", r.restarts, r.cfg.RestartGrace, ab)
			if cur, err = r.startDispatcher(ctx, n, cs); err != nil {
				return nil, err
			}
		}
		if producing.Load() && time.Since(lastPrint) < 5*time.Second {
			continue
		}
		stats, err := pgcall.DeliveryStats(ctx, auditor)
		if err != nil {
			if ctx.Err() != nil {
				timedOut = true
				break loop
			}
			return nil, err
		}
		var open int64
		for _, s := range stats {
			open += s.Pending + s.Leased
		}
		if time.Since(lastPrint) >= 5*time.Second {
			r.cfg.progress("open deliveries %d, consumer answers %d, injected before %d, lost acks %d",
				open, r.faults.answered.Load(), r.faults.injectedBefore.Load(), r.faults.injectedLost.Load())
			lastPrint = time.Now()
		}
		if !producing.Load() && open == 0 {
			break loop // done (restarts not yet reached are reported as such)
		}
	}
	elapsed := time.Since(began)
	// Final stop: nothing should be in flight any more.
	r.abandoned += r.stop(cur)
	cancel()
	<-prodDone
	if producedAt == 0 {
		producedAt = elapsed
	}
	rep, err := r.report(context.Background(), cs, elapsed, producedAt, timedOut)
	if err != nil {
		return nil, err
	}
	r.cfg.progress("done in %s", elapsed.Round(time.Millisecond))
	return rep, nil
}
