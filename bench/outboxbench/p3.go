//go:build bench

package main

// -mode p3 / p3c (SPEC §12a P-3, issue 21 item 3): end to end over HTTP, the same work as
// riverbench -mode p3 / p3c - a call to a consumer that writes in its own database - with the
// real pipeline: the dispatcher (dispatcher, the loop cmd/dispatcher runs, with the
// HTTP transport, HMAC-signed) delivering to the consumer kit (consumer package, the
// metering_input_processor reference consumer) served over loopback HTTP in this process,
// which records the receipt and the consumer's effect in a database of its own
// (<db>_consumer, migrated like any consumer database). p3: the n events are appended first
// (not timed); p3c: -producers append them in transactions of -tx while the dispatcher runs.
// The rate is taken from the dispatcher's start to the n-th acknowledged delivery (its
// acks_total counter), and the run checks that every event is published and applied exactly
// once. -cpuprofile writes a Go CPU profile of the measured phase (dispatcher and consumer kit
// share this process); CSTMT lines are the consumer database's top statements
// (pg_stat_statements), as STMT lines are the producer's.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/dispatcher"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/metrics"
	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/transport"
)

const p3Secret = "outboxbench-p3-secret-0123456789"

func runP3(ctx context.Context, o options, dsn string, admin *pgx.Conn, prods []*pgx.Conn) (string, error) {
	// The consumer's own database.
	cname := o.dbName + "_consumer"
	cdsn, err := reference.FreshDatabase(ctx, o.server, cname)
	if err != nil {
		return "", err
	}
	if !o.keep {
		defer func() { _ = migrate.DropDatabase(context.Background(), o.server, cname) }()
	}
	cpc, err := pgxpool.ParseConfig(cdsn)
	if err != nil {
		return "", err
	}
	cpc.MaxConns = int32(o.consumerConns)
	cpool, err := pgxpool.NewWithConfig(ctx, cpc)
	if err != nil {
		return "", err
	}
	defer cpool.Close()
	var spec reference.Spec
	for _, s := range reference.All() {
		if s.Destination == destination {
			spec = s
		}
	}
	if err := spec.Install(ctx, cpool, "outbox_consumer"); err != nil {
		return "", err
	}
	kit, err := spec.New(context.Background(), cpool, func(c *consumer.Config) {
		c.Role = "outbox_consumer"
		c.HMACSecret = []byte(p3Secret)
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	if err != nil {
		return "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: kit, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	// The dispatcher, configured as cmd/dispatcher would be from a file.
	cfg := config.Defaults()
	cfg.Mode = config.ModeDevelopment
	cfg.WorkerName = "outboxbench-p3"
	cfg.BatchSize = o.batch
	cfg.Concurrency = o.concurrency
	cfg.Prefetch = o.prefetch
	cfg.DBMaxConns = o.dbConns
	cfg.OutcomeFlushInterval = o.flush
	cfg.Lease = time.Minute
	cfg.PollInterval = 100 * time.Millisecond
	cfg.DatabaseRole = "outbox_dispatcher"
	cfg.Destinations = map[string]config.Destination{destination: {
		Transport: config.TransportHTTP, URL: "http://" + l.Addr().String() + "/deliver", Timeout: 10 * time.Second,
		Auth: config.AuthHMAC, Secret: config.NewSecret([]byte(p3Secret)), MaxResponseBytes: 1 << 20,
	}}
	if errs := cfg.Validate(); len(errs) > 0 {
		return "", fmt.Errorf("dispatcher config: %v", errors.Join(errs...))
	}
	trs, err := transport.Build(&cfg, nil)
	if err != nil {
		return "", err
	}
	pc, err := dispatcher.PoolConfig(&cfg, dsn)
	if err != nil {
		return "", err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	m := metrics.New()
	d, err := dispatcher.New(pool, &cfg, dispatcher.Options{Transports: trs, Metrics: m,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		return "", err
	}
	if err := d.Preflight(ctx); err != nil {
		return "", err
	}

	if o.mode == "p3" {
		if _, err := appendAll(ctx, prods, o); err != nil {
			return "", fmt.Errorf("backlog: %w", err)
		}
		for _, t := range []string{"outbox.outbox_events", "outbox.outbox_deliveries"} {
			if _, err := admin.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
				return "", err
			}
		}
	}
	bud, err := startBudget(ctx, admin, prods)
	if err != nil {
		return "", fmt.Errorf("budget: %w", err)
	}
	cadmin, err := pgx.Connect(ctx, cdsn)
	if err != nil {
		return "", err
	}
	defer cadmin.Close(context.Background())
	cbud, err := startBudget(ctx, cadmin, nil)
	if err != nil {
		return "", fmt.Errorf("consumer budget: %w", err)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return "", err
		}
		defer pprof.StopCPUProfile()
	}
	var ru0 runtime.MemStats
	runtime.ReadMemStats(&ru0)

	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	var appendDur time.Duration
	prodDone := make(chan error, 1)
	if o.mode == "p3c" {
		go func() {
			var err error
			appendDur, err = appendAll(dctx, prods, o)
			prodDone <- err
		}()
	} else {
		prodDone <- nil
	}
	acks := m.Acks.WithLabelValues(destination, eventType, eventSchema, "complete")
	var elapsed time.Duration
	var prodErr error
	var prodFinished atomic.Bool
	for {
		if !prodFinished.Load() {
			select {
			case prodErr = <-prodDone:
				prodFinished.Store(true)
				if prodErr != nil {
					return "", fmt.Errorf("producers: %w", prodErr)
				}
			default:
			}
		}
		if testutil.ToFloat64(acks) >= float64(o.n) {
			elapsed = time.Since(start)
			break
		}
		select {
		case err := <-done:
			return "", fmt.Errorf("dispatcher stopped early: %v", err)
		case <-ctx.Done():
			return "", fmt.Errorf("after %.0f of %d acks: %w", testutil.ToFloat64(acks), o.n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if !prodFinished.Load() {
		if err := <-prodDone; err != nil {
			return "", fmt.Errorf("producers: %w", err)
		}
	}
	dcancel()
	if err := <-done; err != nil {
		return "", fmt.Errorf("dispatcher drain: %w", err)
	}
	walPerEvent, budgetLines, err := bud.finish(ctx, admin, prods, o.mode, o.n, o.top)
	if err != nil {
		return "", fmt.Errorf("budget: %w", err)
	}
	_, cLines, err := cbud.finish(ctx, cadmin, nil, o.mode, o.n, o.top)
	if err != nil {
		return "", fmt.Errorf("consumer budget: %w", err)
	}
	for _, l := range cLines {
		if strings.HasPrefix(l, "STMT ") {
			budgetLines = append(budgetLines, "C"+l) // the consumer database's statements
		}
	}
	if !o.budget {
		budgetLines = nil
	}

	if _, err := admin.Exec(ctx, "SET ROLE outbox_auditor"); err != nil {
		return "", err
	}
	sum, err := pgcall.ReadPublicationSummary(ctx, admin)
	if err != nil {
		return "", err
	}
	applied, dup, err := spec.Effects(ctx, cpool)
	if err != nil {
		return "", err
	}
	if sum.Events != int64(o.n) || sum.Published != int64(o.n) || sum.NonTerminal != 0 || sum.OpenAttempts != 0 ||
		applied != int64(o.n) || dup != 0 {
		return "", fmt.Errorf("incomplete run: %+v, consumer applied %d (%d more than once), want %d events", sum, applied, dup, o.n)
	}
	outcomeCalls := 0.0
	for _, op := range []string{"ack", "retry", "quarantine"} {
		outcomeCalls += histCount(m, op)
	}
	kv := []string{
		"deliveries_per_sec=" + rate(int64(o.n), elapsed),
		"events_published_per_sec=" + rate(sum.Published, elapsed),
		"events=" + strconv.Itoa(o.n),
		"elapsed_s=" + strconv.FormatFloat(elapsed.Seconds(), 'f', 3, 64),
		"payload_bytes=" + strconv.Itoa(o.payload),
		"destinations=1",
		"transport=http_hmac",
		"batch=" + strconv.Itoa(o.batch),
		"concurrency=" + strconv.Itoa(o.concurrency),
		"prefetch=" + strconv.Itoa(o.prefetch),
		"outcome_flush_interval=" + o.flush.String(),
		"db_max_conns=" + strconv.Itoa(o.dbConns),
		"consumer_conns=" + strconv.Itoa(o.consumerConns),
		"claim_calls=" + strconv.FormatFloat(claimCalls(m), 'f', 0, 64),
		"outcome_calls=" + strconv.FormatFloat(outcomeCalls, 'f', 0, 64),
		"gomaxprocs=" + strconv.Itoa(runtime.GOMAXPROCS(0)),
		"wal_bytes_per_event=" + strconv.FormatFloat(walPerEvent, 'f', 0, 64),
		"budget=" + strconv.FormatBool(o.budget),
	}
	if o.mode == "p3c" {
		kv = append(kv, "producers="+strconv.Itoa(o.producers), "tx_size="+strconv.Itoa(o.txSize),
			"appended_per_sec="+rate(int64(o.n), appendDur))
	}
	return strings.Join(append([]string{"RESULT pgoutbox " + o.mode + " " + strings.Join(kv, " ")}, budgetLines...), "\n"), nil
}

func claimCalls(m *metrics.Metrics) float64 {
	s := 0.0
	for _, t := range []string{"notify", "poll", "more"} {
		s += testutil.ToFloat64(m.ClaimCalls.WithLabelValues(t))
	}
	return s
}

// histCount is the number of observations of the outcome-batch histogram for op (= calls).
func histCount(m *metrics.Metrics, op string) float64 {
	pm, ok := m.OutcomeBatchSize.WithLabelValues(op).(prometheus.Metric)
	if !ok {
		return 0
	}
	var out dto.Metric
	if err := pm.Write(&out); err != nil || out.Histogram == nil {
		return 0
	}
	return float64(out.Histogram.GetSampleCount())
}
