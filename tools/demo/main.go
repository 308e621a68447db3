// Command demo runs pgoutbox end to end on the local cluster (`make demo`): a fresh producer
// database and four consumer databases, the reference release registered and activated, the
// real cmd/refconsumer and cmd/dispatcher processes over loopback HTTP with HMAC, a producer
// appending a realistic mix of the 13 reference event types (wallet-first reservations,
// out-of-order revisions and one event the consumer rejects), and a summary of what was
// delivered. It stops by itself and exits non-zero if any check fails.
//
//	demo -server postgres://postgres@127.0.0.1:PORT/postgres -bin bin [-runs 20]
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/reference"
	"github.com/oceanway/pgoutbox/reference/scenario"
)

func main() {
	server := flag.String("server", os.Getenv("DATABASE_URL"), "URL of the cluster's maintenance database (the demo creates its own databases)")
	bin := flag.String("bin", "bin", "folder holding the dispatcher and refconsumer binaries")
	runs := flag.Int("runs", 20, "business runs to produce (13 events each, plus one rejected event)")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up waiting for the deliveries after this long")
	cutoverOnly := flag.Bool("cutover", false, "run only the projection cutover part (make demo-cutover)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cutoverOnly {
		if err := runCutoverDemo(ctx, *server); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
		fmt.Println("\ncutover checks passed: v2 rebuilt while producing, switched with a readiness proof, rolled back, one content digest throughout.")
		return
	}
	if err := run(ctx, *server, *bin, *runs, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	server                string
	producerURL           string
	consumerURLs          map[string]string // consumer name -> database URL
	consumerAddr, metrics string
	secrets               map[string]string // consumer name -> HMAC secret
	children              []*exec.Cmd
}

func run(ctx context.Context, server, bin string, runs int, timeout time.Duration) error {
	if server == "" {
		return errors.New("-server (or DATABASE_URL) is required; `make demo` sets it")
	}
	d := &demo{server: server, consumerURLs: map[string]string{}, secrets: map[string]string{}}
	defer d.stopChildren()

	step("databases")
	var err error
	if d.producerURL, err = reference.FreshDatabase(ctx, d.server, "pgoutbox_demo"); err != nil {
		return err
	}
	for _, s := range reference.All() {
		u, err := reference.FreshDatabase(ctx, d.server, "pgoutbox_demo_"+strings.TrimSuffix(s.ConsumerName, "_consumer"))
		if err != nil {
			return err
		}
		d.consumerURLs[s.ConsumerName] = u
		d.secrets[s.ConsumerName] = randomHex(32)
		if err := bindConsumer(ctx, u, s.ConsumerName); err != nil {
			return err
		}
	}
	fmt.Printf("  producer database  %s\n", redact(d.producerURL))
	for _, s := range reference.All() {
		fmt.Printf("  consumer database  %-42s %s\n", s.ConsumerName, redact(d.consumerURLs[s.ConsumerName]))
	}

	step("reference release")
	q, err := d.activateReference(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  active: version %d, schema %d, %s %s\n", q.DeliverySetVersion, q.DefinitionSchemaVersion, q.DigestAlgorithmVersion, q.DefinitionDigest)

	step("consumers and dispatcher")
	if err := d.startConsumers(ctx, bin); err != nil {
		return err
	}
	if err := d.startDispatcher(ctx, bin); err != nil {
		return err
	}
	fmt.Printf("  refconsumer        http://%s/consumers/<name> (HMAC-SHA256)\n", d.consumerAddr)
	fmt.Printf("  dispatcher metrics http://%s/metrics\n", d.metrics)

	step("producing")
	conn, err := d.connectAs(ctx, "outbox_producer")
	if err != nil {
		return err
	}
	n, err := scenario.Produce(ctx, conn, runs)
	conn.Close(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  appended %d events in business transactions\n", n)

	step("delivering")
	if err := d.waitTerminal(ctx, timeout); err != nil {
		return err
	}
	if err := d.summary(ctx); err != nil {
		return err
	}
	if err := d.runIntakeDemo(ctx); err != nil {
		return fmt.Errorf("intake: %w", err)
	}
	return runMailboxDemo(ctx, d.server)
}

func step(s string) { fmt.Printf("\n== %s\n", s) }

func redact(u string) string {
	if i := strings.Index(u, "@"); i > 0 {
		if j := strings.Index(u, "://"); j > 0 && strings.Contains(u[j+3:i], ":") {
			return u[:j+3] + "***" + u[i:]
		}
	}
	return u
}

func (d *demo) connectAs(ctx context.Context, role string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, d.producerURL)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

func (d *demo) activateReference(ctx context.Context) (pgcall.Quartet, error) {
	doc, err := reference.LoadRelease()
	if err != nil {
		return pgcall.Quartet{}, err
	}
	conn, err := d.connectAs(ctx, "outbox_registrar")
	if err != nil {
		return pgcall.Quartet{}, err
	}
	defer conn.Close(ctx)
	q, err := pgcall.RegisterDeliverySet(ctx, conn, doc, reference.SourceRelease)
	if err != nil {
		return q, err
	}
	return q, pgcall.ActivateDeliverySet(ctx, conn, q)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (d *demo) start(name string, cmd *exec.Cmd) error {
	logPath := filepath.Join(os.TempDir(), "pgoutbox-demo-"+name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	d.children = append(d.children, cmd)
	fmt.Printf("  started %-17s pid %d, log %s\n", name, cmd.Process.Pid, logPath)
	return nil
}

func (d *demo) startConsumers(ctx context.Context, bin string) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	d.consumerAddr = addr
	args := []string{"-listen", addr, "-log-level", "warn"}
	env := os.Environ()
	for _, s := range reference.All() {
		args = append(args, "-consumer-role", s.ConsumerName+"="+consumerRole(s.ConsumerName))
		args = append(args, "-db", s.ConsumerName+"="+d.consumerURLs[s.ConsumerName])
		env = append(env, "REFCONSUMER_"+strings.ToUpper(s.ConsumerName)+"_HMAC_SECRET="+d.secrets[s.ConsumerName])
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "refconsumer"), args...)
	cmd.Env = env
	if err := d.start("refconsumer", cmd); err != nil {
		return err
	}
	return waitReady(ctx, "http://"+addr+"/readyz", 30*time.Second)
}

func (d *demo) startDispatcher(ctx context.Context, bin string) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	d.metrics = addr
	var b strings.Builder
	fmt.Fprintf(&b, "mode = \"production\"\nworker_name = \"demo-dispatcher\"\nbatch_size = 32\nconcurrency = 16\n")
	fmt.Fprintf(&b, "lease = \"30s\"\npoll_interval = \"200ms\"\nrecovery_interval = \"1s\"\nmetrics_address = %q\n", addr)
	// stats_interval 1s: the backlog gauges catch up with the final state within a second
	// (the final print waits for that, waitGaugesDrained).
	fmt.Fprintf(&b, "database_role = \"outbox_dispatcher\"\nlog_level = \"warn\"\nstats_interval = \"1s\"\n")
	env := os.Environ()
	for _, s := range reference.All() {
		secretEnv := "PGOUTBOX_SECRET_" + strings.ToUpper(s.Destination)
		fmt.Fprintf(&b, "\n[destinations.%s]\ntransport = \"http\"\nurl = \"http://%s/consumers/%s\"\nauth = \"hmac\"\nsecret_env = %q\ntimeout = \"10s\"\n",
			s.Destination, d.consumerAddr, s.ConsumerName, secretEnv)
		env = append(env, secretEnv+"="+d.secrets[s.ConsumerName])
	}
	cfgPath := filepath.Join(os.TempDir(), "pgoutbox-demo-dispatcher.toml")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o600); err != nil {
		return err
	}
	env = append(env, "PGOUTBOX_DATABASE_URL="+d.producerURL)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "dispatcher"), "-config", cfgPath)
	cmd.Env = env
	if err := d.start("dispatcher", cmd); err != nil {
		return err
	}
	fmt.Printf("  dispatcher config  %s\n", cfgPath)
	return waitReady(ctx, "http://"+addr+"/readyz", 30*time.Second)
}

func waitReady(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (see the logs above)", url, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *demo) stopChildren() {
	for i := len(d.children) - 1; i >= 0; i-- {
		c := d.children[i]
		if c.Process == nil || c.ProcessState != nil {
			continue
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
		}
	}
}

func (d *demo) waitTerminal(ctx context.Context, within time.Duration) error {
	conn, err := d.connectAs(ctx, "outbox_auditor")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(within)
	last := int64(-1)
	for {
		s, err := pgcall.ReadPublicationSummary(ctx, conn)
		if err != nil {
			return err
		}
		if s.NonTerminal != last {
			fmt.Printf("  %s  open deliveries %4d, published events %4d of %d\n", time.Now().Format("15:04:05"), s.NonTerminal, s.Published, s.Events)
			last = s.NonTerminal
		}
		if s.NonTerminal == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d deliveries still open after %s", s.NonTerminal, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (d *demo) summary(ctx context.Context) error {
	conn, err := d.connectAs(ctx, "outbox_auditor")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	step("deliveries by destination")
	status, err := pgcall.DeliveryStatus(ctx, conn)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  DESTINATION\tCONSUMER\tPENDING\tLEASED\tACKNOWLEDGED\tQUARANTINED")
	for _, s := range status {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\n", s.Destination, s.ConsumerName, s.Pending, s.Leased, s.Acknowledged, s.Quarantined)
	}
	_ = tw.Flush()

	step("quarantined (never deleted, never a fake success)")
	q, err := pgcall.QuarantinedDeliveries(ctx, conn, nil, 20)
	if err != nil {
		return err
	}
	for _, r := range q {
		fmt.Printf("  %s  %s  reason=%s  attempts=%d\n", r.Destination, r.EventType, r.Reason, r.AttemptCount)
	}
	if len(q) == 0 {
		fmt.Println("  none")
	}

	step("publication")
	s, err := pgcall.ReadPublicationSummary(ctx, conn)
	if err != nil {
		return err
	}
	fmt.Printf("  events %d, published %d, fully acknowledged %d, attempts %d (open %d)\n",
		s.Events, s.Published, s.FullyAcked, s.AttemptStarts, s.OpenAttempts)

	step("consumers (effects applied; duplicates must be 0)")
	var dup int64
	for _, spec := range reference.All() {
		c, err := pgx.Connect(ctx, d.consumerURLs[spec.ConsumerName])
		if err != nil {
			return err
		}
		applied, duplicated, err := spec.Effects(ctx, c)
		c.Close(ctx)
		if err != nil {
			return err
		}
		dup += duplicated
		fmt.Printf("  %-42s applied %4d  duplicated %d\n", spec.ConsumerName, applied, duplicated)
	}

	step("dispatcher metrics (selected series)")
	// The backlog gauges are refreshed by the dispatcher every stats_interval: wait until they
	// show the state just read from the database (no open delivery) before printing them, so the
	// print never shows a stale pending count next to "open deliveries 0" (issue 12 defect 6).
	if s.NonTerminal == 0 {
		waitGaugesDrained("http://"+d.metrics+"/metrics", 15*time.Second)
	}
	if err := printMetrics("http://" + d.metrics + "/metrics"); err != nil {
		fmt.Printf("  (metrics unavailable: %v)\n", err)
	}
	fmt.Printf("\n  metrics were served at http://%s/metrics while the demo ran; run the dispatcher yourself\n", d.metrics)
	fmt.Println("  (docs/dispatcher.md) to keep them up.")

	var problems []string
	if s.NonTerminal != 0 || s.OpenAttempts != 0 {
		problems = append(problems, "open deliveries or attempts remain")
	}
	if s.Published != s.FullyAcked {
		problems = append(problems, "published count differs from fully acknowledged count")
	}
	if dup != 0 {
		problems = append(problems, "a consumer applied an event twice")
	}
	if len(q) != 1 {
		problems = append(problems, fmt.Sprintf("expected exactly the one rejected event in quarantine, found %d", len(q)))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Println("\nall checks passed: every mandatory delivery is terminal, nothing lost, nothing applied twice.")
	return nil
}

// waitGaugesDrained polls url until every pgoutbox_pending_deliveries and
// pgoutbox_leased_deliveries series reads 0, or bound passes (then the print says what it saw).
func waitGaugesDrained(url string, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for {
		drained, err := gaugesDrained(url)
		if err == nil && drained {
			return
		}
		if time.Now().After(deadline) {
			fmt.Println("  (the dispatcher's backlog gauges had not caught up yet)")
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrapeMetrics calls visit with each non-comment line of the Prometheus text at url until visit
// returns false.
func scrapeMetrics(url string, visit func(line string) bool) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); !strings.HasPrefix(l, "#") && !visit(l) {
			return nil
		}
	}
	return sc.Err()
}

func gaugesDrained(url string) (bool, error) {
	drained := true
	err := scrapeMetrics(url, func(l string) bool {
		if (strings.HasPrefix(l, "pgoutbox_pending_deliveries{") || strings.HasPrefix(l, "pgoutbox_leased_deliveries{")) &&
			!strings.HasSuffix(l, " 0") {
			drained = false
		}
		return drained
	})
	return drained && err == nil, err
}

func printMetrics(url string) error {
	return scrapeMetrics(url, func(l string) bool {
		for _, p := range []string{"pgoutbox_dispatcher_acks_total", "pgoutbox_dispatcher_retries_total",
			"pgoutbox_dispatcher_quarantines_total", "pgoutbox_dispatcher_fencing_rejections_total", "pgoutbox_pending_deliveries"} {
			if strings.HasPrefix(l, p) && !strings.HasSuffix(l, " 0") {
				fmt.Println("  " + l)
			}
		}
		return true
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// consumerRole is the demo's own role for one reference consumer (SPEC R-SEC-5: each consumer acts
// only as itself; its name is bound to this role in its database).
func consumerRole(consumerName string) string { return "pgoutbox_demo_" + consumerName }

// bindConsumer creates the consumer's role (a NOLOGIN group role granted outbox_consumer; the
// demo's superuser session switches to it with SET LOCAL ROLE) and binds the consumer name to it
// in the consumer's database.
func bindConsumer(ctx context.Context, dbURL, consumerName string) error {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	if err := ensureRole(ctx, c, consumerRole(consumerName), "outbox_consumer"); err != nil {
		return fmt.Errorf("role for %s: %w", consumerName, err)
	}
	return pgcall.BindConsumerRole(ctx, c, consumerName, consumerRole(consumerName))
}

// ensureRole creates the NOLOGIN group role if it is missing (tolerating a concurrent create)
// and grants it the given kernel roles.
func ensureRole(ctx context.Context, c *pgx.Conn, role string, grants ...string) error {
	id := pgx.Identifier{role}.Sanitize()
	if _, err := c.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '`+role+`') THEN
			CREATE ROLE `+id+` NOLOGIN;
		END IF;
	EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
	END $$`); err != nil {
		return err
	}
	for _, g := range grants {
		if _, err := c.Exec(ctx, `GRANT `+pgx.Identifier{g}.Sanitize()+` TO `+id); err != nil {
			return err
		}
	}
	return nil
}
