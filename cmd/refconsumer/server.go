package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/wire"
)

type serveOptions struct {
	spec          reference.Spec
	dbURL         string
	secret, token string
	role, grantTo string
	install       bool
	maxConcurrent int
	insecure      bool
	// HTTP limits and the signature window (consumer.Config).
	maxBodyBytes    int64
	maxUnauthReads  int
	signatureWindow time.Duration
	acceptBodyOnly  bool
	unauthGrace     time.Duration
	unauthRate      int64
	unauthStall     time.Duration
	oneRoundTrip    bool
	// dual: the second projection version every delivery is also applied to (cutover
	// dual-apply), dualToken its live build token while it is a shadow.
	dual      *reference.Spec
	dualToken string
}

// errDatabaseDown is what a gated pool answers while its monitor sees the database down; the
// kit maps it to the retryable database_unavailable.
var errDatabaseDown = errors.New("database unavailable (monitor backing off)")

// gatedPool fails fast while the database is known to be down, so a restarting PostgreSQL is
// not hammered by one dial per request; the monitor re-checks it with backoff.
type gatedPool struct {
	pool *pgxpool.Pool
	up   atomic.Bool
}

func (g *gatedPool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	if !g.up.Load() {
		return nil, errDatabaseDown
	}
	return g.pool.BeginTx(ctx, opts)
}

// SendBatch: the one-round-trip path (consumer.Config.Mutate).
func (g *gatedPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !g.up.Load() {
		return errBatch{errDatabaseDown}
	}
	return g.pool.SendBatch(ctx, b)
}

// errBatch is the results of a batch that was never sent.
type errBatch struct{ err error }

func (e errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errBatch) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errBatch) QueryRow() pgx.Row                { return errRow(e) }
func (e errBatch) Close() error                     { return e.err }
func (e errBatch) Tx() pgx.Tx                       { return nil }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

type served struct {
	opts      serveOptions
	gate      *gatedPool
	cfg       consumer.Config
	installed atomic.Bool
	// kit is nil until the receipt catalog could be read from the consumer's database (the kit
	// loads it at start): a consumer started while its database is down serves once it is up.
	kit atomic.Pointer[consumer.Consumer]
}

type server struct {
	log      *slog.Logger
	consumer map[string]*served
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

func newServer(ctx context.Context, log *slog.Logger, opts []serveOptions) (*server, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &server{log: log, consumer: map[string]*served{}, cancel: cancel}
	for _, o := range opts {
		cfg, err := pgxpool.ParseConfig(o.dbURL)
		if err != nil {
			cancel()
			s.close()
			return nil, errors.New("consumer " + o.spec.ConsumerName + ": invalid database URL")
		}
		if cfg.ConnConfig.ConnectTimeout == 0 {
			cfg.ConnConfig.ConnectTimeout = 5 * time.Second
		}
		cfg.MaxConns = int32(min(o.maxConcurrent+2, 64))
		cfg.HealthCheckPeriod = 10 * time.Second
		pool, err := pgxpool.NewWithConfig(ctx, cfg) // lazy: does not dial yet
		if err != nil {
			cancel()
			s.close()
			return nil, err
		}
		gate := &gatedPool{pool: pool}
		kc := o.spec.Config(gate) // one database round trip per delivery where the consumer only writes
		if !o.oneRoundTrip {
			kc = o.spec.ApplyConfig(gate)
		}
		kc.Role = o.role
		kc.HMACSecret = []byte(o.secret)
		kc.BearerToken = o.token
		kc.InsecureNoAuth = o.insecure
		kc.MaxConcurrent = o.maxConcurrent
		kc.MaxBodyBytes, kc.MaxUnauthenticatedReads = o.maxBodyBytes, o.maxUnauthReads
		kc.SignatureWindow, kc.AcceptBodyOnlySignature = o.signatureWindow, o.acceptBodyOnly
		kc.UnauthenticatedReadGrace, kc.MinUnauthenticatedBodyRate, kc.UnauthenticatedStall = o.unauthGrace, o.unauthRate, o.unauthStall
		kc.Logger = log
		if o.dual != nil {
			kc.DualApply = &consumer.DualTarget{ProjectionVersion: o.dual.ProjectionVersion, Apply: o.dual.ApplyConfig(gate).Apply, BuildToken: o.dualToken}
		}
		// The gate is closed until the monitor's first check, so this validates the configuration
		// and leaves the catalog (and the kit) to the monitor.
		_, err = consumer.New(ctx, kc)
		if err != nil && !errors.Is(err, consumer.ErrCatalogUnavailable) {
			pool.Close()
			cancel()
			s.close()
			return nil, err
		}
		sv := &served{opts: o, gate: gate, cfg: kc}
		s.consumer[o.spec.ConsumerName] = sv
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.monitor(ctx, sv) }()
	}
	return s, nil
}

// monitor pings the consumer's database: every 5 s while it is up, with exponential backoff
// (0.5 s doubling to 30 s) while it is down; installs the domain schema once it is reachable.
func (s *server) monitor(ctx context.Context, sv *served) {
	log := s.log.With("consumer", sv.opts.spec.ConsumerName)
	const minBackoff, maxBackoff, upInterval = 500 * time.Millisecond, 30 * time.Second, 5 * time.Second
	backoff := minBackoff
	for {
		err := s.check(ctx, sv)
		wait := upInterval
		if err != nil {
			if sv.gate.up.Swap(false) || backoff == minBackoff {
				log.Warn("consumer database unavailable", "err", err)
			}
			wait = backoff
			backoff = min(backoff*2, maxBackoff)
		} else {
			if !sv.gate.up.Swap(true) {
				log.Info("consumer database available")
			}
			backoff = minBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (s *server) check(ctx context.Context, sv *served) error {
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := sv.gate.pool.Ping(pctx); err != nil {
		return err
	}
	if sv.opts.install && !sv.installed.Load() {
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := sv.opts.spec.Install(ictx, sv.gate.pool, sv.opts.grantTo); err != nil {
			return err
		}
		if d := sv.opts.dual; d != nil {
			if err := d.Install(ictx, sv.gate.pool, sv.opts.grantTo); err != nil {
				return err
			}
		}
		sv.installed.Store(true)
		s.log.Info("consumer schema installed", "consumer", sv.opts.spec.ConsumerName, "schema", sv.opts.spec.Schema)
	}
	if sv.kit.Load() == nil {
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cfg := sv.cfg
		cfg.Pool = sv.gate.pool // the gate opens only after this check
		kit, err := consumer.New(kctx, cfg)
		if err != nil {
			return err
		}
		// The kit keeps the gated pool for its deliveries (fail fast while the database is down).
		cfg.Pool, cfg.Catalog = sv.gate, kit.Catalog()
		if kit, err = consumer.New(kctx, cfg); err != nil {
			return err
		}
		sv.kit.Store(kit)
	}
	return nil
}

func (s *server) mux() http.Handler {
	mux := http.NewServeMux()
	for name, sv := range s.consumer {
		mux.HandleFunc("/consumers/"+name, func(w http.ResponseWriter, r *http.Request) {
			if kit := sv.kit.Load(); kit != nil {
				kit.ServeHTTP(w, r)
				return
			}
			// Not started yet: its database (and so its receipt catalog) has not answered.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(wire.HTTPErrorBody{Code: "database_unavailable", Ref: "receipt_catalog"})
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		for name, sv := range s.consumer {
			if !sv.gate.up.Load() || (sv.opts.install && !sv.installed.Load()) || sv.kit.Load() == nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("not ready: " + name + "\n"))
				return
			}
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

func (s *server) close() {
	s.cancel()
	s.wg.Wait()
	for _, sv := range s.consumer {
		sv.gate.pool.Close()
	}
}
