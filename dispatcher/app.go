package dispatcher

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

// Exit codes of the dispatcher process.
const (
	ExitOK      = 0 // clean drain (or grace expired: the rest is left to lease expiry, logged)
	ExitRuntime = 1 // database or transport could not be set up
	ExitRefused = 2 // unsafe start refused: bad config, no active delivery set, preflight (R-DP-6)
)

// NewLogger returns the process's JSON logger (R-DP-5) at level.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// PoolConfig builds the pgx pool configuration of cfg for dsn: pool size, statement timeout,
// application name and, when configured, the role every session switches to.
func PoolConfig(cfg *config.Config, dsn string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors may quote the DSN; do not pass them on.
		return nil, errors.New("database URL is not a valid PostgreSQL connection string")
	}
	pc.MaxConns = int32(cfg.DBMaxConns)
	pc.MaxConnIdleTime = time.Minute
	pc.HealthCheckPeriod = 5 * time.Second
	rp := pc.ConnConfig.RuntimeParams
	rp["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = "pgoutbox-dispatcher"
	}
	if cfg.DatabaseRole != "" {
		rp["role"] = cfg.DatabaseRole
	}
	return pc, nil
}

// ProcessOptions are what a program running the dispatcher process adds to the configuration
// file (all optional; the zero value is the plain binary).
type ProcessOptions struct {
	// InProcess holds the consumers of destinations configured with transport "inprocess".
	InProcess map[string]wire.Consumer
	// Custom holds the program's own transports of destinations configured with transport
	// "custom".
	Custom map[string]transport.Transport
	// Hooks, when set, reads the environment and returns the hook the dispatcher runs with
	// (Options.Hook) or an error that refuses the start. Only test builds set it (cmd/dispatcher
	// built with -tags failpoints); without it, PGOUTBOX_FAILPOINTS in the environment refuses
	// the start.
	Hooks func(env Env, production bool) (func(point string), error)
}

// EnvFailpoints names the test-only failpoints of a test build (internal/pgoutboxtest/failpoint);
// a dispatcher built without them refuses to start when it is set.
const EnvFailpoints = "PGOUTBOX_FAILPOINTS"

// Process is the whole dispatcher process minus signal handling (cmd/dispatcher is a thin
// wrapper): parse flags, load and validate the config, connect, refuse an unsafe start, serve
// metrics and run until ctx is cancelled, then drain. It returns the exit code.
func Process(ctx context.Context, args []string, env Env, stderr io.Writer, po ProcessOptions) int {
	fs := flag.NewFlagSet("dispatcher", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "path of the TOML configuration file (default $PGOUTBOX_CONFIG)")
	check := fs.Bool("check", false, "validate the configuration and the database preflight, then exit")
	if err := fs.Parse(args); err != nil {
		return ExitRefused
	}
	if *cfgPath == "" {
		if v, ok := env(config.EnvPrefix + "CONFIG"); ok {
			*cfgPath = v
		}
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "dispatcher: -config (or PGOUTBOX_CONFIG) is required")
		return ExitRefused
	}
	cfg, err := config.Load(*cfgPath, env)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitRefused
	}
	log := NewLogger(stderr, cfg.LogLevel)
	// Test-only hooks (T-3): a test build configures them (and refuses them outside test mode);
	// any other build refuses an environment that asks for them.
	var hook func(string)
	if po.Hooks != nil {
		if hook, err = po.Hooks(env, cfg.Mode == config.ModeProduction); err != nil {
			log.Error("refusing to start", "error", err.Error())
			return ExitRefused
		}
	} else if v, _ := env(EnvFailpoints); strings.TrimSpace(v) != "" {
		log.Error("refusing to start", "error", EnvFailpoints+" is set but this dispatcher is built without failpoints (they exist only in test builds: go build -tags failpoints)")
		return ExitRefused
	}
	dsn, err := config.DatabaseURL(env)
	if err != nil {
		log.Error("refusing to start", "error", err.Error())
		return ExitRefused
	}
	pc, err := PoolConfig(cfg, dsn)
	if err != nil {
		log.Error("refusing to start", "error", err.Error())
		return ExitRefused
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		log.Error("database pool", "error", safeErr(err))
		return ExitRuntime
	}
	defer pool.Close()

	trs, err := transport.Build(cfg, po.InProcess)
	if err != nil {
		log.Error("refusing to start", "error", err.Error())
		return ExitRefused
	}
	for name, t := range po.Custom {
		if d, ok := cfg.Destinations[name]; !ok || d.Transport != config.TransportCustom {
			log.Error("refusing to start", "error", "custom transport given for "+name+", which is not configured with transport custom")
			return ExitRefused
		}
		trs[name] = t
	}
	defer func() {
		for _, t := range trs {
			_ = t.Close()
		}
	}()
	m := metrics.New()
	m.Registry.MustRegister(metrics.NewRedeliveries(pool, cfg.StatementTimeout)) // R-AK-10
	d, err := New(pool, cfg, Options{Transports: trs, Metrics: m, Logger: log, Hook: hook})
	if err != nil {
		log.Error("refusing to start", "error", err.Error())
		return ExitRefused
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.StatementTimeout+5*time.Second)
	err = d.Preflight(pctx)
	cancel()
	if err != nil {
		if errors.Is(err, ErrNoActiveDeliverySet) || !isTransientDB(err) {
			log.Error("refusing to start", "error", safeErr(err))
			return ExitRefused
		}
		log.Error("database unreachable at start", "error", safeErr(err))
		return ExitRuntime
	}
	if *check {
		log.Info("configuration and preflight ok", "database", config.RedactURL(dsn))
		return ExitOK
	}

	srv, err := metrics.Listen(cfg.MetricsAddress, m, d.Ready)
	if err != nil {
		log.Error("metrics listener", "address", cfg.MetricsAddress, "error", err.Error())
		return ExitRuntime
	}
	go func() {
		if err := srv.Serve(); err != nil {
			log.Error("metrics server", "error", err.Error())
		}
	}()
	log.Info("metrics listening", "address", srv.Addr())

	err = d.Run(ctx)
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(sctx)
	scancel()
	var de *DrainError
	if errors.As(err, &de) {
		// Bounded drain by design: the rest is left to lease expiry, never acknowledged.
		return ExitOK
	}
	if err != nil {
		log.Error("dispatcher", "error", safeErr(err))
		return ExitRuntime
	}
	return ExitOK
}
