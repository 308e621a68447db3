//go:build bench

package main

// -mode p3 / p3c (SPEC §12a P-3, issue 21 item 3, issue 36 items 4 and 5): end to end over HTTP,
// the same work as riverbench -mode p3 / p3c - a call to a consumer that writes in its own
// database - with the product as users run it: the real dispatcher binary (cmd/dispatcher, -dispatcher,
// configured by a TOML file like docs/dispatcher.example.toml: HTTP transport, v1 HMAC
// signature, production mode) delivering to the consumer kit (consumer package, the
// metering_input_processor reference consumer built by reference.Spec.New: its documented
// default, the one-round-trip Mutate path) served over loopback HTTP by this process, which
// records the receipt and the consumer's effect in a database of its own (<db>_consumer,
// migrated like any consumer database). p3: the n events are appended first (not timed); p3c:
// -producers append them in transactions of -tx while the dispatcher runs. The rate is taken
// from the dispatcher's start to the n-th acknowledged delivery (its acks_total counter, read
// from its /metrics), and the run checks that every event is published and applied exactly once.
// P-5: the Go CPU per delivery of each side - the dispatcher process's (its
// process_cpu_seconds_total) and this process's (getrusage: the consumer kit and its HTTP server,
// plus the p3c producers) over the measured phase. -cpuprofile writes a Go CPU profile of this
// process (the consumer side); CSTMT lines are the consumer database's top statements
// (pg_stat_statements), as STMT lines are the producer's.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/consumer"
	"github.com/oceanway/pgoutbox/internal/migrate"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/reference"
)

const p3Secret = "outboxbench-p3-secret-0123456789"

// p3SecretEnv is the environment variable the dispatcher's configuration names (secret_env).
const p3SecretEnv = "OUTBOXBENCH_P3_SECRET"

// dispatcherTOML is the dispatcher's configuration file for one P-3 run.
func dispatcherTOML(o options, metricsAddr, url string) string {
	return fmt.Sprintf(`# outboxbench -mode %[1]s: the dispatcher as a user runs it (docs/dispatcher.md)
mode = "production"
worker_name = "outboxbench-p3"
batch_size = %[2]d
concurrency = %[3]d
prefetch = %[4]d
lease = "1m"
lease_renewal = true
poll_interval = "100ms"
outcome_flush_interval = "%[5]s"
db_max_conns = %[6]d
database_role = "outbox_dispatcher"
metrics_address = "%[7]s"
log_level = "warn"

[destinations.%[8]s]
transport = "http"
url = "%[9]s"
auth = "hmac"
secret_env = "%[10]s"
timeout = "10s"
max_response_bytes = 1048576
`, o.mode, o.batch, o.concurrency, o.prefetch, o.flush, o.dbConns, metricsAddr, destination, url, p3SecretEnv)
}

// dispatcherBinary is -dispatcher, else the dispatcher built next to this binary (bin/), else
// one on PATH.
func dispatcherBinary(o options) (string, error) {
	if o.dispatcherBin != "" {
		return o.dispatcherBin, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "dispatcher"); fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("dispatcher")
	if err != nil {
		return "", errors.New("no dispatcher binary: go build -o bin/dispatcher ./cmd/dispatcher, or pass -dispatcher")
	}
	return p, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// freeAddr returns a loopback host:port nobody listens on right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// scrape reads the dispatcher's /metrics: every sample's value summed per metric name, with the
// labels in want (name{label="value"}) filtering where given.
func scrape(ctx context.Context, client *http.Client, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		key := line[:sp]
		name := key
		if i := strings.IndexByte(key, '{'); i >= 0 {
			name = key[:i]
			// Keep the series of interest addressable by one label too.
			for _, lbl := range []string{`outcome="complete"`, `outcome="ack"`, `outcome="retry"`, `outcome="quarantine"`} {
				if strings.Contains(key, lbl) {
					out[name+"{"+lbl+"}"] += v
				}
			}
		}
		out[name] += v
	}
	return out, sc.Err()
}

func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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
	var kitCfg consumer.Config
	kit, err := spec.New(context.Background(), cpool, func(c *consumer.Config) {
		defer func() { kitCfg = *c }()
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

	// The dispatcher binary, configured from a file as a user configures it.
	bin, err := dispatcherBinary(o)
	if err != nil {
		return "", err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "outboxbench-p3-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "dispatcher.toml")
	if err := os.WriteFile(cfgPath, []byte(dispatcherTOML(o, metricsAddr, "http://"+l.Addr().String()+"/deliver")), 0o600); err != nil {
		return "", err
	}
	dispatcherLog, err := os.Create(filepath.Join(dir, "dispatcher.log"))
	if err != nil {
		return "", err
	}
	defer dispatcherLog.Close()
	metricsClient := &http.Client{Timeout: 2 * time.Second}

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
	cmd := exec.Command(bin, "-config", cfgPath)
	cmd.Env = append(os.Environ(), "PGOUTBOX_DATABASE_URL="+dsn, p3SecretEnv+"="+p3Secret)
	cmd.Stdout, cmd.Stderr = dispatcherLog, dispatcherLog
	cpu0 := cpuSelf()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() error { // SIGTERM: the graceful drain of R-DP-3
		if stopped {
			return nil
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			return errors.New("dispatcher did not drain within 60s")
		}
	}
	defer func() { _ = stop() }()
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
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
	var elapsed time.Duration
	var prodErr error
	prodFinished := false
	var last map[string]float64
	for {
		if !prodFinished {
			select {
			case prodErr = <-prodDone:
				prodFinished = true
				if prodErr != nil {
					return "", fmt.Errorf("producers: %w", prodErr)
				}
			default:
			}
		}
		if mv, err := scrape(ctx, metricsClient, metricsAddr); err == nil {
			last = mv
			if mv["pgoutbox_dispatcher_acks_total{outcome=\"complete\"}"] >= float64(o.n) {
				elapsed = time.Since(start)
				break
			}
		}
		select {
		case err := <-exited:
			stopped = true
			return "", fmt.Errorf("dispatcher stopped early: %v (log: %s)", err, tail(dispatcherLog.Name()))
		case <-ctx.Done():
			return "", fmt.Errorf("after %.0f of %d acks: %w", last["pgoutbox_dispatcher_acks_total{outcome=\"complete\"}"], o.n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	consumerCPU := cpuSelf() - cpu0
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	dispatcherCPU := last["process_cpu_seconds_total"]
	if !prodFinished {
		if err := <-prodDone; err != nil {
			return "", fmt.Errorf("producers: %w", err)
		}
	}
	dcancel()
	if err := stop(); err != nil {
		return "", fmt.Errorf("dispatcher drain: %w (log: %s)", err, tail(dispatcherLog.Name()))
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
	// The calls' counters after the drain (the last scrape before SIGTERM is close enough for
	// the call counts; the drain only flushes what was pending).
	outcomeCalls := last["pgoutbox_dispatcher_outcome_batch_outcomes_count"]
	ackOutcomes, ackCalls := last["pgoutbox_dispatcher_outcome_batch_outcomes_sum{outcome=\"ack\"}"], last["pgoutbox_dispatcher_outcome_batch_outcomes_count{outcome=\"ack\"}"]
	perDelivery := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d.Microseconds())/float64(o.n), 'f', 1, 64)
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
		"claim_calls=" + strconv.FormatFloat(last["pgoutbox_dispatcher_claim_calls_total"], 'f', 0, 64),
		"outcome_calls=" + strconv.FormatFloat(outcomeCalls, 'f', 0, 64),
		"ack_calls=" + strconv.FormatFloat(ackCalls, 'f', 0, 64),
		"acks_per_call=" + strconv.FormatFloat(ackOutcomes/max(ackCalls, 1), 'f', 1, 64),
		"dispatcher_cpu_us_per_delivery=" + perDelivery(time.Duration(dispatcherCPU*float64(time.Second))),
		"consumer_cpu_us_per_delivery=" + perDelivery(consumerCPU),
		"dispatcher=" + filepath.Base(bin),
		"consumer_path=" + consumerPath(kitCfg),
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

// consumerPath names the kit's path: mutate (one round trip) or apply.
func consumerPath(c consumer.Config) string {
	if c.Mutate != nil {
		return "mutate"
	}
	return "apply"
}

// tail is the end of the dispatcher's log, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
