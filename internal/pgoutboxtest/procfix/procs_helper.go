// Package procfix runs the real binaries for the tests under tests/ (tests/e2e: crash points,
// overlap, PostgreSQL restart; tests/projection: the outboxctl crash tests). Helpers of the
// real-process tests (crash points, overlap, PostgreSQL restart): build cmd/dispatcher and
// cmd/refconsumer into a temporary folder, give a producer database with the reference release
// plus one database per reference consumer, run the binaries over loopback HTTP with HMAC secrets
// and a generated TOML, capture their output, wait for markers and readiness, and check the final
// state the suites share (T-3, R-AK-8, T-8).
package procfix

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
)

// Deadline bounds every wait of these suites; it only keeps a broken test from hanging.
const Deadline = 90 * time.Second

type cpBins struct{ Dispatcher, refconsumer string }

// Build builds both binaries into dir with one go build, the dispatcher with its test-only
// failpoints (-tags failpoints: the product build has none).
func Build(t *testing.T, dir string) cpBins {
	t.Helper()
	cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", dir+string(os.PathSeparator),
		"github.com/oceanway/pgoutbox/cmd/dispatcher", "github.com/oceanway/pgoutbox/cmd/refconsumer")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return cpBins{Dispatcher: filepath.Join(dir, "dispatcher"), refconsumer: filepath.Join(dir, "refconsumer")}
}

// World is one producer database with the reference release active and fast retries, and a
// fresh database per reference consumer (R-CO-6), with a random HMAC secret each.
type World struct {
	ProducerDSN string
	consumerDSN map[string]string // consumer name → database URL
	secrets     map[string]string // consumer name → HMAC secret
	events      int               // appended so far
	runs        int
}

// SetupWorld creates the World: the producer database and a database and secret per reference
// consumer.
func SetupWorld(t *testing.T) *World {
	t.Helper()
	db := dispatcherfix.Setup(t)
	for _, spec := range reference.All() {
		// Out-of-order revisions (awaiting_revision) are retried quickly.
		dispatcherfix.FastRetry(t, db.Admin, spec.Destination, 50)
	}
	w := &World{ProducerDSN: db.Dsn, consumerDSN: map[string]string{}, secrets: map[string]string{}}
	for _, spec := range reference.All() {
		w.consumerDSN[spec.ConsumerName] = testdb.URL(t)
		w.secrets[spec.ConsumerName] = cpRandomHex(24)
	}
	return w
}

// produce appends runs of the reference scenario (13 events each plus one rejected event) as
// outbox_producer through the producer library.
func (w *World) Produce(t *testing.T, runs int) {
	t.Helper()
	conn := Connect(t, w.ProducerDSN, "outbox_producer")
	defer conn.Close(context.Background())
	n, err := scenario.Produce(context.Background(), conn, runs)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	w.events += n
	w.runs += runs
}

// Connect opens a connection as role (SET ROLE; "" keeps the superuser), closed by the caller.
// Used instead of testdb.Conn where the cluster may restart under the connection.
func Connect(t *testing.T, dsn, role string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if role != "" {
		if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

func cpRandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func cpFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Proc is a running child process whose stdout and stderr are captured line by line.
type Proc struct {
	Name   string
	Cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	Exited chan struct{}
	Err    error // cmd.Wait's result, once exited is closed
}

// Start starts bin with args and env (nothing inherited but PATH and HOME) and kills it at
// test end if it still runs; on failure its last lines go to the test log.
func Start(t *testing.T, name, bin string, args, env []string) *Proc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	_ = w.Close()
	p := &Proc{Name: name, Cmd: cmd, Exited: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		_ = r.Close()
	}()
	go func() {
		err := cmd.Wait()
		<-read
		p.Err = err
		close(p.Exited)
	}()
	t.Cleanup(func() {
		if !p.HasExited() {
			_ = cmd.Process.Kill() // also ends a SIGSTOPped process
			<-p.Exited
		}
		if t.Failed() {
			p.mu.Lock()
			from := max(0, len(p.lines)-40)
			t.Logf("--- last output of %s (pid %d):\n%s", name, cmd.Process.Pid, strings.Join(p.lines[from:], "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// HasExited reports whether the process has exited.
func (p *Proc) HasExited() bool {
	select {
	case <-p.Exited:
		return true
	default:
		return false
	}
}

// Output is every line the process printed so far.
func (p *Proc) Output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// waitLine waits until a line containing substr was printed and returns it.
func (p *Proc) WaitLine(t *testing.T, substr string) string {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for {
		for _, l := range p.Output() {
			if strings.Contains(l, substr) {
				return l
			}
		}
		if p.HasExited() {
			// One last look: the reader finished before exited was closed.
			for _, l := range p.Output() {
				if strings.Contains(l, substr) {
					return l
				}
			}
			t.Fatalf("%s exited (%v) without printing %q", p.Name, p.Err, substr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q", p.Name, substr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitKilled waits for the process to end and asserts it was ended by SIGKILL (T-3: a real
// kill -9, no deferred cleanup, no drain).
func (p *Proc) WaitKilled(t *testing.T) {
	t.Helper()
	select {
	case <-p.Exited:
	case <-time.After(Deadline):
		t.Fatalf("%s did not die", p.Name)
	}
	var ee *exec.ExitError
	if !errors.As(p.Err, &ee) {
		t.Fatalf("%s exited with %v, want death by SIGKILL", p.Name, p.Err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s ended with %v, want death by SIGKILL", p.Name, ee)
	}
}

// waitStopped waits until the kernel reports the process stopped (state T after SIGSTOP).
func (p *Proc) WaitStopped(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
		if err == nil {
			// pid (comm) state …: the state follows the last ')'.
			if s := string(b); strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "T") {
				return
			}
		}
		if p.HasExited() || time.Now().After(deadline) {
			t.Fatalf("%s did not stop (exited %v)", p.Name, p.HasExited())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit (R-DP-3).
func (p *Proc) Stop(t *testing.T) {
	t.Helper()
	if p.HasExited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited:
	case <-time.After(Deadline):
		t.Fatalf("%s did not stop after SIGTERM", p.Name)
	}
}

func cpWaitHTTP200(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready", url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartConsumers runs cmd/refconsumer serving the four reference consumers, each on its own
// database with its own HMAC secret, and waits for /readyz. It returns the listen address.
func StartConsumers(t *testing.T, bins cpBins, w *World) (*Proc, string) {
	t.Helper()
	addr := cpFreeAddr(t)
	args := []string{"-listen", addr, "-role", "outbox_consumer", "-log-level", "warn"}
	var env []string
	for _, s := range reference.All() {
		args = append(args, "-db", s.ConsumerName+"="+w.consumerDSN[s.ConsumerName])
		env = append(env, "REFCONSUMER_"+strings.ToUpper(s.ConsumerName)+"_HMAC_SECRET="+w.secrets[s.ConsumerName])
	}
	p := Start(t, "refconsumer", bins.refconsumer, args, env)
	cpWaitHTTP200(t, "http://"+addr+"/readyz")
	return p, addr
}

// DispatcherOpts are the keys of the generated dispatcher TOML that the suites vary.
type DispatcherOpts struct {
	Worker       string
	Lease        string // e.g. "2s"
	Renewal      bool
	Batch        int
	Concurrency  int
	Failpoints   string // PGOUTBOX_FAILPOINTS; "" = none
	logLevel     string
	ExtraEnvVars []string
}

// StartDispatcher writes a development-mode TOML for the four reference destinations over
// HMAC HTTP to the refconsumer at consumerAddr and starts cmd/dispatcher (test mode on, so
// failpoints may be armed). It waits for the metrics listener and returns it with its address.
func StartDispatcher(t *testing.T, bins cpBins, w *World, consumerAddr string, o DispatcherOpts) (*Proc, string) {
	t.Helper()
	if o.logLevel == "" {
		o.logLevel = "info"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mode = \"development\"\nworker_name = %q\nbatch_size = %d\nconcurrency = %d\n", o.Worker, o.Batch, o.Concurrency)
	fmt.Fprintf(&b, "lease = %q\nlease_renewal = %t\nstatement_timeout = \"900ms\"\n", o.Lease, o.Renewal)
	fmt.Fprintf(&b, "poll_interval = \"100ms\"\nrecovery_interval = \"200ms\"\nstats_interval = \"1s\"\nshutdown_grace = \"5s\"\n")
	fmt.Fprintf(&b, "metrics_address = \"127.0.0.1:0\"\ndatabase_role = \"outbox_dispatcher\"\nlog_level = %q\n", o.logLevel)
	env := []string{"PGOUTBOX_DATABASE_URL=" + w.ProducerDSN, "PGOUTBOX_TEST_MODE=1"}
	for _, s := range reference.All() {
		secretEnv := "CP_SECRET_" + strings.ToUpper(s.Destination)
		fmt.Fprintf(&b, "\n[destinations.%s]\ntransport = \"http\"\nurl = \"http://%s/consumers/%s\"\nauth = \"hmac\"\nsecret_env = %q\ntimeout = \"10s\"\n",
			s.Destination, consumerAddr, s.ConsumerName, secretEnv)
		env = append(env, secretEnv+"="+w.secrets[s.ConsumerName])
	}
	if o.Failpoints != "" {
		env = append(env, "PGOUTBOX_FAILPOINTS="+o.Failpoints)
	}
	env = append(env, o.ExtraEnvVars...)
	path := filepath.Join(t.TempDir(), o.Worker+".toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := Start(t, o.Worker, bins.Dispatcher, []string{"-config", path}, env)
	l := p.WaitLine(t, `"msg":"metrics listening"`)
	const key = `"address":"`
	i := strings.Index(l, key)
	if i < 0 {
		t.Fatalf("no address in %q", l)
	}
	addr := l[i+len(key):]
	addr = addr[:strings.IndexByte(addr, '"')]
	return p, addr
}

// Scrape sums the samples of metric (all label sets) on a dispatcher's /metrics (R-DP-4).
func Scrape(t *testing.T, metricsAddr, metric string) float64 {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, metric+"{") && !strings.HasPrefix(l, metric+" ") {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q", l)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// waitAllTerminal polls (as outbox_auditor) until no delivery is pending or leased.
func (w *World) waitAllTerminal(t *testing.T) pgcall.PublicationSummary {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	var last pgcall.PublicationSummary
	for {
		if conn == nil || conn.IsClosed() {
			if c, err := pgx.Connect(context.Background(), w.ProducerDSN); err == nil {
				if _, err := c.Exec(context.Background(), "SET ROLE outbox_auditor"); err == nil {
					conn = c
				} else {
					c.Close(context.Background())
				}
			}
		}
		if conn != nil {
			s, err := pgcall.ReadPublicationSummary(context.Background(), conn)
			if err == nil {
				last = s
				if s.NonTerminal == 0 && s.Events == int64(w.events) {
					return s
				}
			} else {
				conn.Close(context.Background())
				conn = nil
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries not terminal in time: %+v", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Attempt is one attempt start joined with its finish.
type Attempt struct {
	Destination, EventID, AttemptID, Worker string
	Number                                  int
	Outcome                                 string // "" = no finish
	StartedAt                               time.Time
}

// waitDispatcherBackendsGone waits until no dispatcher backend is left in the producer
// database. A SIGKILLed dispatcher may have sent a COMMIT that the server has not read yet;
// its backend applies it before it sees the closed socket, so a snapshot taken right after
// the kill can still change. Once the backends are gone it cannot. Call it only while no
// other dispatcher runs against the world.
func (w *World) WaitDispatcherBackendsGone(t *testing.T) {
	t.Helper()
	conn := Connect(t, w.ProducerDSN, "")
	defer conn.Close(context.Background())
	deadline := time.Now().Add(Deadline)
	for {
		var n int
		if err := conn.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'pgoutbox-dispatcher'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dispatcher backends still open after the kill", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Attempts is every delivery attempt of the producer database.
func (w *World) Attempts(t *testing.T) []Attempt {
	t.Helper()
	conn := Connect(t, w.ProducerDSN, "")
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `
		SELECT s.destination, s.event_id::text, s.attempt_id::text, s.worker, s.attempt_number,
		       COALESCE(f.outcome, ''), s.started_at
		FROM outbox.outbox_delivery_attempt_starts s
		LEFT JOIN outbox.outbox_delivery_attempt_finishes f ON f.attempt_id = s.attempt_id
		ORDER BY s.destination, s.event_id, s.attempt_number`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		err := r.Scan(&a.Destination, &a.EventID, &a.AttemptID, &a.Worker, &a.Number, &a.Outcome, &a.StartedAt)
		return a, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Receipt is one inbox receipt of a consumer database.
type Receipt struct{ RecordedAt time.Time }

// receipts returns consumer → event id → receipt, asserting receipts are unique per event.
func (w *World) Receipts(t *testing.T) map[string]map[string]Receipt {
	t.Helper()
	out := map[string]map[string]Receipt{}
	for _, spec := range reference.All() {
		conn := Connect(t, w.consumerDSN[spec.ConsumerName], "")
		rows, err := conn.Query(context.Background(),
			`SELECT event_id::text, recorded_at FROM inbox.inbox_receipts WHERE consumer_name = $1`, spec.ConsumerName)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]Receipt{}
		for rows.Next() {
			var id string
			var r Receipt
			if err := rows.Scan(&id, &r.RecordedAt); err != nil {
				t.Fatal(err)
			}
			if _, dup := m[id]; dup {
				t.Errorf("%s: two receipts for event %s", spec.ConsumerName, id)
			}
			m[id] = r
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		conn.Close(context.Background())
		out[spec.ConsumerName] = m
	}
	return out
}

// checkFinal asserts the final state of T-3 / R-AK-8 after a run of the reference scenario:
// every mandatory delivery terminal (only the one rejected event quarantined), every attempt
// start with exactly one finish (none left open; the primary key forbids a second), at most one
// acknowledged finish per delivery and on its current attempt, each consumer's effects applied
// exactly once, receipts unique and one per acknowledged delivery, published_at set for exactly
// the fully acknowledged events. It returns the attempts and receipts for window-specific checks.
func (w *World) CheckFinal(t *testing.T) ([]Attempt, map[string]map[string]Receipt) {
	t.Helper()
	ctx := context.Background()
	s := w.waitAllTerminal(t)
	if s.OpenAttempts != 0 {
		t.Errorf("%d attempt starts have no finish", s.OpenAttempts)
	}
	if s.Published != s.FullyAcked || s.Published != int64(w.events-1) {
		t.Errorf("published %d, fully acknowledged %d, want both %d (all but the rejected event)", s.Published, s.FullyAcked, w.events-1)
	}
	admin := Connect(t, w.ProducerDSN, "")
	defer admin.Close(ctx)
	var q, qBad, acked, ackedFinishes, badCurrent int
	if err := admin.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'quarantined'),
		(SELECT count(*) FROM outbox.outbox_quarantine WHERE reason <> 'consumer_rejected' OR destination <> 'core_operations'),
		(SELECT count(*) FROM outbox.outbox_deliveries WHERE status = 'acknowledged'),
		(SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE outcome = 'acknowledged'),
		(SELECT count(*) FROM outbox.outbox_deliveries d WHERE d.status = 'acknowledged' AND NOT EXISTS (
			SELECT 1 FROM outbox.outbox_delivery_attempt_finishes f
			WHERE f.attempt_id = d.current_attempt_id AND f.outcome = 'acknowledged'))`).
		Scan(&q, &qBad, &acked, &ackedFinishes, &badCurrent); err != nil {
		t.Fatal(err)
	}
	if q != 1 || qBad != 0 {
		t.Errorf("quarantined %d (unexpected %d), want only the rejected run.created", q, qBad)
	}
	if ackedFinishes != acked || badCurrent != 0 {
		t.Errorf("acknowledged deliveries %d, acknowledged finishes %d, without a finish on the current attempt %d", acked, ackedFinishes, badCurrent)
	}
	wantApplied := map[string]int64{
		reference.OperationsProjector: int64(w.runs) * 9, reference.MeteringInputProcessorConsumer: int64(w.runs) * 2,
		reference.BillingFinalizationCoordinatorConsumer: int64(w.runs) * 2, reference.BillingSettlementCatchUpConsumer: int64(w.runs),
	}
	rc := w.Receipts(t)
	for _, spec := range reference.All() {
		c := Connect(t, w.consumerDSN[spec.ConsumerName], "")
		applied, dup, err := spec.Effects(ctx, c)
		c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if applied != wantApplied[spec.ConsumerName] || dup != 0 {
			t.Errorf("%s applied %d (want %d), applied more than once %d (want 0)", spec.ConsumerName, applied, wantApplied[spec.ConsumerName], dup)
		}
		var n int64
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM outbox.outbox_deliveries WHERE destination = $1 AND status = 'acknowledged'`,
			spec.Destination).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if int64(len(rc[spec.ConsumerName])) != n || n != applied {
			t.Errorf("%s: %d receipts, %d acknowledged deliveries, %d effects: want all equal", spec.ConsumerName, len(rc[spec.ConsumerName]), n, applied)
		}
	}
	return w.Attempts(t), rc
}

// consumerOf maps a destination to its reference consumer name.
func ConsumerOf(dest string) string {
	for _, s := range reference.All() {
		if s.Destination == dest {
			return s.ConsumerName
		}
	}
	return ""
}
