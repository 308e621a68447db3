package pump

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/mailbox"
	"github.com/oceanway/pgoutbox/producer"
)

// Exit codes of cmd/mailboxpump.
const (
	ExitOK     = 0 // drained after SIGTERM/SIGINT
	ExitError  = 1 // runtime failure (database unreachable, hold lost)
	ExitConfig = 2 // invalid configuration
	ExitHeld   = 3 // another live pump holds the source (R-MX-11)
)

const usageText = `usage: mailboxpump [flags]   (every flag also reads its environment variable)
  -source NAME          MAILBOXPUMP_SOURCE         registered source (mailbox.register_source)
  -db URL               PGOUTBOX_DATABASE_URL      our database; the login needs outbox_mailbox and outbox_producer
  -role ROLE            MAILBOXPUMP_ROLE           optional SET ROLE after connecting to our database
  -mailbox-db URL       MAILBOX_DATABASE_URL       the mailbox's database (read msg_id > W, write processed_at only)
  -table NAME           MAILBOX_TABLE              mailbox table: name or schema.name
  -worker NAME          MAILBOXPUMP_WORKER         lease owner literal (default mailboxpump)
  -lease D              MAILBOXPUMP_LEASE          head lease (default 5m)
  -poll D               MAILBOXPUMP_POLL           idle wait between ticks (default 1s)
  -discovery-batch N    MAILBOXPUMP_DISCOVERY_BATCH rows read per discovery (default 500)
  -backfill-batch N     MAILBOXPUMP_BACKFILL_BATCH marks per backfill round (default 200)
  -late-rescan D        MAILBOXPUMP_LATE_RESCAN    how long released holes are re-read (default 1h)
  -metrics-addr ADDR    MAILBOXPUMP_METRICS_ADDR   serve /metrics and /healthz (default off)
  -tenant-kind, -tenant-id, -workspace-id          tenant of the outbound events (default system/<source>/mailbox)
`

// HandlerFactory builds the handler (the public mailbox.Handler) Process runs for source; tenant
// is the outbound events' tenant from the -tenant-kind, -tenant-id and -workspace-id flags.
// cmd/mailboxpump passes reference.NewMailboxHandler; a command of yours passes its own:
//
//	code := Process(ctx, os.Args[1:], os.LookupEnv, os.Stderr,
//		func(source string, tenant producer.Tenant) mailbox.Handler { return myHandler{tenant} })
type HandlerFactory func(source string, tenant producer.Tenant) mailbox.Handler

// Process is cmd/mailboxpump: parse flags and environment, connect, run the handler newHandler
// builds until ctx is cancelled. It returns the exit code; a second instance for a held source
// says why and returns ExitHeld.
func Process(ctx context.Context, args []string, getenv func(string) (string, bool), stderr io.Writer, newHandler HandlerFactory) int {
	cfg := Defaults()
	env := func(k, def string) string {
		if v, ok := getenv(k); ok && v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("mailboxpump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usageText) }
	fs.StringVar(&cfg.Source, "source", env("MAILBOXPUMP_SOURCE", ""), "")
	ourURL := fs.String("db", env("PGOUTBOX_DATABASE_URL", ""), "")
	role := fs.String("role", env("MAILBOXPUMP_ROLE", ""), "")
	boxURL := fs.String("mailbox-db", env("MAILBOX_DATABASE_URL", ""), "")
	fs.StringVar(&cfg.Table, "table", env("MAILBOX_TABLE", ""), "")
	fs.StringVar(&cfg.Worker, "worker", env("MAILBOXPUMP_WORKER", cfg.Worker), "")
	durVar(fs, &cfg.Lease, "lease", env("MAILBOXPUMP_LEASE", ""), cfg.Lease)
	durVar(fs, &cfg.PollInterval, "poll", env("MAILBOXPUMP_POLL", ""), cfg.PollInterval)
	durVar(fs, &cfg.LateRescan, "late-rescan", env("MAILBOXPUMP_LATE_RESCAN", ""), cfg.LateRescan)
	intVar(fs, &cfg.DiscoveryBatch, "discovery-batch", env("MAILBOXPUMP_DISCOVERY_BATCH", ""), cfg.DiscoveryBatch)
	intVar(fs, &cfg.BackfillBatch, "backfill-batch", env("MAILBOXPUMP_BACKFILL_BATCH", ""), cfg.BackfillBatch)
	metricsAddr := fs.String("metrics-addr", env("MAILBOXPUMP_METRICS_ADDR", ""), "")
	tk := fs.String("tenant-kind", env("MAILBOXPUMP_TENANT_KIND", "system"), "")
	tid := fs.String("tenant-id", env("MAILBOXPUMP_TENANT_ID", ""), "")
	wid := fs.String("workspace-id", env("MAILBOXPUMP_WORKSPACE_ID", "mailbox"), "")
	if err := fs.Parse(args); err != nil {
		return ExitConfig
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if *ourURL == "" || *boxURL == "" {
		fmt.Fprintln(stderr, "mailboxpump: both -db (our database) and -mailbox-db are required")
		return ExitConfig
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "mailboxpump:", err)
		return ExitConfig
	}
	if *tid == "" {
		*tid = cfg.Source
	}
	dctx := context.WithoutCancel(ctx)
	cctx, cancel := context.WithTimeout(dctx, 30*time.Second)
	defer cancel()
	our, err := pgx.Connect(cctx, *ourURL)
	if err != nil {
		fmt.Fprintln(stderr, "mailboxpump: connect to our database:", err)
		return ExitError
	}
	defer our.Close(dctx)
	if *role != "" {
		if _, err := our.Exec(cctx, "SET ROLE "+pgx.Identifier{*role}.Sanitize()); err != nil {
			fmt.Fprintln(stderr, "mailboxpump: set role:", err)
			return ExitConfig
		}
	}
	box, err := pgxpool.New(cctx, *boxURL)
	if err != nil {
		fmt.Fprintln(stderr, "mailboxpump: mailbox database:", err)
		return ExitError
	}
	defer box.Close()
	m := NewMetrics(cfg.Source)
	if newHandler == nil {
		fmt.Fprintln(stderr, "mailboxpump: no handler")
		return ExitConfig
	}
	h := newHandler(cfg.Source, producer.Tenant{TenantKind: *tk, TenantID: *tid, WorkspaceID: *wid})
	p, err := New(cfg, our, box, h, m, log)
	if err != nil {
		fmt.Fprintln(stderr, "mailboxpump:", err)
		return ExitConfig
	}
	if *metricsAddr != "" {
		srv, err := metrics.ListenRegistry(*metricsAddr, m.Registry, func(context.Context) error { return nil })
		if err != nil {
			fmt.Fprintln(stderr, "mailboxpump: metrics listener:", err)
			return ExitConfig
		}
		go func() { _ = srv.Serve() }()
		defer srv.Shutdown(context.WithoutCancel(ctx))
	}
	if err := p.Run(ctx); err != nil {
		if errors.Is(err, ErrPumpHeld) {
			fmt.Fprintf(stderr, "mailboxpump: refusing to run: another mailboxpump session holds source %s (single active instance, SPEC R-MX-11); stop it first or wait until its session ends\n", cfg.Source)
			return ExitHeld
		}
		fmt.Fprintln(stderr, "mailboxpump:", err)
		return ExitError
	}
	return ExitOK
}

func durVar(fs *flag.FlagSet, p *time.Duration, name, envVal string, def time.Duration) {
	if envVal != "" {
		if d, err := time.ParseDuration(envVal); err == nil {
			def = d
		} else {
			def = -1 // fails validation with a clear message
		}
	}
	fs.DurationVar(p, name, def, "")
}

func intVar(fs *flag.FlagSet, p *int, name, envVal string, def int) {
	if envVal != "" {
		if n, err := strconv.Atoi(envVal); err == nil {
			def = n
		} else {
			def = -1
		}
	}
	fs.IntVar(p, name, def, "")
}
