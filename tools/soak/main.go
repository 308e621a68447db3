// Command soak runs the bounded soak of SPEC T-8 on the local cluster (`make soak`): fresh
// producer and consumer databases, concurrent producers appending the 13 reference event types,
// the dispatcher in process delivering to the four reference consumers over loopback HTTP with
// injected transient failures, lost acks and dispatcher restarts. It prints the machine-checked
// report, writes it to -out and exits non-zero when any invariant is violated. It stops by
// itself (event count and -time-limit).
//
//	soak -server postgres://postgres@127.0.0.1:PORT/postgres [-events 100000] [-failure-rate 0.05]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/soak"
	"github.com/oceanway/pgoutbox/reference"
)

func main() {
	server := flag.String("server", os.Getenv("DATABASE_URL"), "URL of the cluster's maintenance database (the soak creates its own databases)")
	events := flag.Int("events", 100000, "business events to append (rounded up to whole runs of 13 reference event types)")
	producers := flag.Int("producers", 4, "concurrent producers")
	failure := flag.Float64("failure-rate", 0.05, "fraction of deliveries answered retryable consumer_unavailable before applying")
	lost := flag.Float64("lost-ack-rate", 0, "fraction of deliveries whose answer is lost after the receipt commit (0: failure-rate/5)")
	restarts := flag.Int("restarts", 2, "dispatcher stop/start cycles while work is in flight")
	limit := flag.Duration("time-limit", 20*time.Minute, "stop after this long (the report then shows what was not delivered)")
	conc := flag.Int("concurrency", 32, "dispatcher concurrency")
	batch := flag.Int("batch-size", 32, "claim batch size")
	lease := flag.Duration("lease", 3*time.Second, "lease duration")
	maxConns := flag.Int("db-max-conns", 16, "dispatcher pool size")
	tr := flag.String("transport", soak.TransportHTTP, "http (loopback, HMAC) or inprocess")
	seed := flag.Uint64("seed", 0, "fault injection seed (0: from the clock)")
	out := flag.String("out", "docs/soak-report.md", "write the Markdown report here (empty: do not write)")
	keep := flag.Bool("keep", false, "keep the soak databases afterwards")
	verbose := flag.Bool("v", false, "dispatcher and consumer warnings on stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, *server, *keep, *out, *verbose, soak.Config{
		Events: *events, Producers: *producers, Rejected: true, FailureRate: *failure, LostAckRate: *lost,
		Restarts: *restarts, TimeLimit: *limit, Concurrency: *conc, BatchSize: *batch, Lease: *lease,
		DBMaxConns: *maxConns, Transport: *tr, Seed: *seed, Progress: os.Stdout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
	}
	os.Exit(code)
}

func run(ctx context.Context, server string, keep bool, out string, verbose bool, cfg soak.Config) (int, error) {
	if server == "" {
		return 2, errors.New("-server (or DATABASE_URL) is required; `make soak` sets it")
	}
	if verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	names := []string{"pgoutbox_soak"}
	var err error
	fmt.Println("== databases")
	if cfg.ProducerDSN, err = reference.FreshDatabase(ctx, server, names[0]); err != nil {
		return 1, err
	}
	cfg.ConsumerDSNs = map[string]string{}
	for _, s := range reference.All() {
		name := "pgoutbox_soak_" + strings.TrimSuffix(s.ConsumerName, "_consumer")
		names = append(names, name)
		if cfg.ConsumerDSNs[s.ConsumerName], err = reference.FreshDatabase(ctx, server, name); err != nil {
			return 1, err
		}
	}
	fmt.Printf("  %s\n", strings.Join(names, ", "))
	if !keep {
		defer func() {
			for _, n := range names {
				_ = migrate.DropDatabase(context.Background(), server, n)
			}
		}()
	}
	fmt.Println("== soak")
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		return 1, err
	}
	md := rep.Markdown()
	fmt.Println()
	fmt.Println(md)
	if out != "" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return 1, err
		}
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			return 1, err
		}
		fmt.Printf("report written to %s\n", out)
	}
	if err := rep.Check(); err != nil {
		return 1, err
	}
	return 0, nil
}
