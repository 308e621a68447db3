// Command riverbench measures River (riverqueue/river) on the same cluster as pgoutbox, for the
// side-by-side obligations P-1, P-2, P-3 and P-6 of SPEC §12a. It lives in a Go module of its own
// (bench/river) so that the product's go.mod never depends on River.
//
// It mirrors River's own benchmark (a no-op worker, the River CLI's client settings) and adds
// a P-3 anchor: the same HTTP-call-and-one-row work as pgoutbox's P-3.
//
//	riverbench -server URL -mode backlog|concurrent|insertmany|p3|p3c -n 5000
//
// Every run drops and recreates its own database (default pgoutbox_bench_river) and prints one
// machine-readable RESULT line on stdout.
//
// Modes, settings and the P-3 anchor in detail: docs/benchmarks.md#riverbench-benchriver.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

type options struct {
	server, dbName, mode     string
	n, payload, producers    int
	txSize, workers          int
	fetchCooldown, fetchPoll time.Duration
	timeout                  time.Duration
	keep, verbose            bool
	p3Workers, consumerConns int
	// scale curve (SPEC R-DP-9): pool size, jobs per event (backlog) and a RESULT label
	poolConns, jobsPerEvent int
	label                   string
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", os.Getenv("DATABASE_URL"), "superuser URL of the cluster's maintenance database")
	flag.StringVar(&o.dbName, "db", "pgoutbox_bench_river", "database to (re)create for River")
	flag.StringVar(&o.mode, "mode", "backlog", "backlog (P-1), concurrent (P-2), insertmany (P-6), p3 or p3c (P-3 anchor: HTTP worker, consumer writes one row)")
	flag.IntVar(&o.n, "n", 5000, "jobs")
	flag.IntVar(&o.payload, "payload", 400, "size in bytes of each job's encoded args")
	flag.IntVar(&o.producers, "producers", 2, "concurrent producers (concurrent mode)")
	flag.IntVar(&o.txSize, "tx", 100, "jobs per producer transaction (concurrent mode)")
	flag.IntVar(&o.workers, "workers", 2000, "MaxWorkers of the default queue (River's benchmark: 2,000)")
	flag.DurationVar(&o.fetchCooldown, "fetch-cooldown", 2*time.Millisecond, "client FetchCooldown (River's benchmark: 2ms)")
	flag.DurationVar(&o.fetchPoll, "fetch-poll", 20*time.Millisecond, "client FetchPollInterval (River's benchmark: 20ms)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.BoolVar(&o.keep, "keep", false, "keep the database afterwards")
	flag.BoolVar(&o.verbose, "v", false, "River's log on stderr (warnings and up)")
	flag.IntVar(&o.p3Workers, "p3-workers", 64, "MaxWorkers in modes p3/p3c (the pgoutbox dispatcher's concurrency)")
	flag.IntVar(&o.consumerConns, "consumer-conns", 16, "connections of the consumer's pool in modes p3/p3c")
	flag.IntVar(&o.poolConns, "pool-conns", 0, "backlog: MaxConns of the client's pgxpool, and the client in poll-only mode (no LISTEN connection held), so the pool is all River works with (scale curve); 0: pgx defaults, LISTEN/NOTIFY on")
	flag.IntVar(&o.jobsPerEvent, "jobs-per-event", 1, "backlog: jobs inserted per event, side by side in the same InsertMany batch (the counterpart of an event with that many destinations); -n counts events")
	flag.StringVar(&o.label, "label", "", "a label=… key on the RESULT line (scripts/bench-river.sh: curve, for the scale curve's runs)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	line, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
	fmt.Println(line)
}

// BenchArgs are the job's args: a sequence number and padding up to the requested encoded size.
type BenchArgs struct {
	Num int    `json:"num"`
	Pad string `json:"pad"`
}

func (BenchArgs) Kind() string { return "benchmark" }

// newArgs returns args whose JSON encoding is exactly size bytes (when size allows).
func newArgs(num, size int) BenchArgs {
	overhead := len(`{"num":` + strconv.Itoa(num) + `,"pad":""}`)
	return BenchArgs{Num: num, Pad: strings.Repeat("x", max(0, size-overhead))}
}

// BenchWorker works a job by doing nothing, as River's benchmark worker.
type BenchWorker struct {
	river.WorkerDefaults[BenchArgs]
}

func (w *BenchWorker) Work(context.Context, *river.Job[BenchArgs]) error { return nil }

func run(ctx context.Context, o options) (string, error) {
	if o.server == "" {
		return "", errors.New("-server (or DATABASE_URL) is required")
	}
	switch o.mode {
	case "backlog", "concurrent", "insertmany", "p3", "p3c":
	default:
		return "", fmt.Errorf("unknown -mode %q (backlog, concurrent, insertmany, p3 or p3c)", o.mode)
	}
	if o.poolConns < 0 || o.jobsPerEvent < 1 || ((o.poolConns != 0 || o.jobsPerEvent != 1) && o.mode != "backlog") {
		return "", fmt.Errorf("-pool-conns %d -jobs-per-event %d: only mode backlog takes them (pool-conns ≥ 0, jobs-per-event ≥ 1)", o.poolConns, o.jobsPerEvent)
	}
	if strings.ContainsAny(o.label, " =\t\n") {
		return "", fmt.Errorf("-label %q: no spaces or '='", o.label)
	}
	jobs := o.n * o.jobsPerEvent // jobs to work
	p3 := o.mode == "p3" || o.mode == "p3c"
	dsn, err := freshDatabase(ctx, o.server, o.dbName)
	if err != nil {
		return "", err
	}
	if !o.keep {
		defer func() { _ = dropDatabase(context.Background(), o.server, o.dbName) }()
	}
	// The pool as River's CLI opens it: pgx defaults (max(4, NumCPU) connections); -pool-conns
	// fixes its size.
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	if o.poolConns > 0 {
		pcfg.MaxConns = int32(o.poolConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return "", err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return "", fmt.Errorf("rivermigrate: %w", err)
	}

	level := slog.LevelError + 1 // silent
	if o.verbose {
		level = slog.LevelWarn
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &BenchWorker{})
	maxWorkers := o.workers
	var cons *httpConsumer
	if p3 {
		maxWorkers = o.p3Workers
		if cons, err = startConsumer(ctx, o.server, o.dbName+"_consumer", o.consumerConns, o.keep); err != nil {
			return "", fmt.Errorf("consumer: %w", err)
		}
		defer cons.close()
		river.AddWorker(workers, newHTTPWorker(cons.url, o.p3Workers))
	}
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     o.fetchCooldown,
		FetchPollInterval: o.fetchPoll,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		PollOnly:          o.poolConns > 0, // a LISTEN connection would hold one of the few
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return "", err
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs + 1000, // never drop a completion: the count decides the end of the run
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancelSub()

	if o.mode == "insertmany" {
		return insertMany(ctx, dsn, client, o)
	}

	mkArgs := func(i int) river.JobArgs { return newArgs(i, o.payload) }
	if p3 {
		mkArgs = func(i int) river.JobArgs { return HTTPArgs(newArgs(i, o.payload)) }
	}
	if o.mode == "backlog" || o.mode == "p3" {
		const insertBatch = 5000 // as River's benchmark
		batch := make([]river.InsertManyParams, 0, insertBatch)
		for i := 1; i <= jobs; i++ {
			batch = append(batch, river.InsertManyParams{Args: mkArgs(i)})
			if len(batch) == insertBatch || i == jobs {
				if _, err := client.InsertMany(ctx, batch); err != nil {
					return "", fmt.Errorf("insert backlog: %w", err)
				}
				batch = batch[:0]
			}
		}
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE river_job"); err != nil {
			return "", err
		}
	}

	var inserted atomic.Int64
	var prodErr error
	var prodWG sync.WaitGroup
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return "", err
	}
	if o.mode == "concurrent" || o.mode == "p3c" {
		var once sync.Once
		per := (o.n + o.producers - 1) / o.producers
		for p := 0; p < o.producers; p++ {
			from, to := p*per, min(o.n, (p+1)*per)
			prodWG.Add(1)
			go func() {
				defer prodWG.Done()
				if err := produce(ctx, pool, client, from, to, o.txSize, mkArgs, &inserted); err != nil {
					once.Do(func() { prodErr = err })
				}
			}()
		}
	}

	var worked, failed int
	var last time.Time
	for worked+failed < jobs {
		select {
		case ev := <-events:
			if ev == nil {
				return "", errors.New("subscribe channel closed")
			}
			switch {
			case ev.Kind == river.EventKindJobCompleted:
				worked++
			case ev.Kind == river.EventKindJobFailed && ev.Job.State != rivertype.JobStateDiscarded:
				continue // will be retried
			default:
				failed++
			}
			last = time.Now()
		case <-ctx.Done():
			return "", fmt.Errorf("after %d of %d jobs: %w", worked, jobs, ctx.Err())
		}
	}
	elapsed := last.Sub(start)
	prodWG.Wait()
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStop()
	if err := client.Stop(stopCtx); err != nil {
		return "", fmt.Errorf("stop client: %w", err)
	}
	if prodErr != nil {
		return "", prodErr
	}
	if failed > 0 {
		return "", fmt.Errorf("%d jobs failed or were cancelled", failed)
	}
	var completed int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		return "", err
	}
	if completed != jobs {
		return "", fmt.Errorf("river_job holds %d completed jobs, want %d", completed, jobs)
	}
	var argBytes float64
	if err := pool.QueryRow(ctx, "SELECT avg(octet_length(args::text))::float8 FROM river_job").Scan(&argBytes); err != nil {
		return "", err
	}
	kv := []string{
		"jobs_per_sec=" + strconv.FormatFloat(float64(worked)/elapsed.Seconds(), 'f', 1, 64),
		"jobs=" + strconv.Itoa(worked),
		"elapsed_s=" + strconv.FormatFloat(elapsed.Seconds(), 'f', 3, 64),
		"payload_bytes=" + strconv.Itoa(o.payload),
		"stored_args_bytes=" + strconv.FormatFloat(argBytes, 'f', 0, 64),
		"river_version=" + riverVersion(),
		"max_workers=" + strconv.Itoa(maxWorkers),
		"pool_conns=" + strconv.Itoa(int(pool.Config().MaxConns)),
		"fetch_cooldown=" + o.fetchCooldown.String(),
		"fetch_poll=" + o.fetchPoll.String(),
		"gomaxprocs=" + strconv.Itoa(runtime.GOMAXPROCS(0)),
		"jobs_per_event=" + strconv.Itoa(o.jobsPerEvent),
		"events_per_sec=" + strconv.FormatFloat(float64(worked)/float64(o.jobsPerEvent)/elapsed.Seconds(), 'f', 1, 64),
		"poll_only=" + strconv.FormatBool(o.poolConns > 0),
	}
	if o.label != "" {
		kv = append(kv, "label="+o.label)
	}
	if p3 {
		rows, err := cons.rows(ctx)
		if err != nil {
			return "", err
		}
		if rows != int64(o.n) {
			return "", fmt.Errorf("the consumer holds %d rows, want %d", rows, o.n)
		}
		kv = append(kv, "consumer_rows="+strconv.FormatInt(rows, 10), "consumer_conns="+strconv.Itoa(o.consumerConns), "transport=http")
	}
	if o.mode == "concurrent" || o.mode == "p3c" {
		kv = append(kv, "producers="+strconv.Itoa(o.producers), "tx_size="+strconv.Itoa(o.txSize),
			"inserted="+strconv.FormatInt(inserted.Load(), 10))
	}
	return "RESULT river " + o.mode + " " + strings.Join(kv, " "), nil
}

// produce inserts jobs [from, to) in transactions of txSize (InsertManyTx inside the caller's
// transaction, as a service inserting jobs with its own writes would).
func produce(ctx context.Context, pool *pgxpool.Pool, client *river.Client[pgx.Tx], from, to, txSize int, mkArgs func(int) river.JobArgs, inserted *atomic.Int64) error {
	params := make([]river.InsertManyParams, 0, txSize)
	for i := from; i < to; i += txSize {
		params = params[:0]
		for k := i; k < min(to, i+txSize); k++ {
			params = append(params, river.InsertManyParams{Args: mkArgs(k + 1)})
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := client.InsertManyTx(ctx, tx, params)
			return err
		})
		if err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		inserted.Add(int64(len(params)))
	}
	return nil
}

// insertMany is -mode insertmany (SPEC §12a P-6): n jobs inserted with InsertManyTx in
// transactions of o.txSize over o.producers connections (a pool of exactly that many), the
// client never started; timed from the first transaction to the last commit.
func insertMany(ctx context.Context, dsn string, client *river.Client[pgx.Tx], o options) (string, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	cfg.MaxConns, cfg.MinConns = int32(o.producers), int32(o.producers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return "", err
	}
	var inserted atomic.Int64
	var once sync.Once
	var prodErr error
	var wg sync.WaitGroup
	per := (o.n + o.producers - 1) / o.producers
	start := time.Now()
	for p := 0; p < o.producers; p++ {
		from, to := p*per, min(o.n, (p+1)*per)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := produce(ctx, pool, client, from, to, o.txSize, func(i int) river.JobArgs { return newArgs(i, o.payload) }, &inserted); err != nil {
				once.Do(func() { prodErr = err })
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if prodErr != nil {
		return "", prodErr
	}
	var jobs int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&jobs); err != nil {
		return "", err
	}
	if jobs != int64(o.n) {
		return "", fmt.Errorf("river_job holds %d jobs, want %d", jobs, o.n)
	}
	kv := []string{
		"jobs_per_sec=" + strconv.FormatFloat(float64(o.n)/elapsed.Seconds(), 'f', 1, 64),
		"jobs=" + strconv.Itoa(o.n),
		"elapsed_s=" + strconv.FormatFloat(elapsed.Seconds(), 'f', 3, 64),
		"payload_bytes=" + strconv.Itoa(o.payload),
		"river_version=" + riverVersion(),
		"producers=" + strconv.Itoa(o.producers),
		"tx_size=" + strconv.Itoa(o.txSize),
		"gomaxprocs=" + strconv.Itoa(runtime.GOMAXPROCS(0)),
	}
	return "RESULT river insertmany " + strings.Join(kv, " "), nil
}

func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func freshDatabase(ctx context.Context, server, name string) (string, error) {
	if err := dropDatabase(ctx, server, name); err != nil {
		return "", err
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", fmt.Errorf("connect to the cluster: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" ENCODING 'UTF8' TEMPLATE template0"); err != nil {
		return "", err
	}
	return withDatabase(server, name), nil
}

func dropDatabase(ctx context.Context, server, name string) error {
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return fmt.Errorf("connect to the cluster: %w", err)
	}
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// withDatabase returns server (a postgres:// URL) with its database replaced by db.
func withDatabase(server, db string) string {
	i := strings.LastIndex(server, "/")
	rest := ""
	if q := strings.Index(server[i:], "?"); q >= 0 {
		rest = server[i+q:]
	}
	return server[:i+1] + db + rest
}
