//go:build pgrestart

package e2e

// Runs alone (`make test` invokes it after the main suite with -tags pgrestart): restarting the
// shared cluster kills every other test's connections.

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/procfix"
)

// Seed 002, R-DP-1, R-DP-4, R-AK-8, T-3: PostgreSQL restarts (`pg_ctl restart -m fast` on the
// project's own local cluster) in the middle of a run. The dispatcher process is frozen right
// after a mid-run claim (after_claim=pause@2: one batch already delivered, the second claimed),
// the fast shutdown starts, and the dispatcher is resumed while the server is down, so its
// deliveries, outcome calls, claims and LISTEN connection all meet the outage; the refconsumer
// process loses its database at the same time. Both must reconnect with backoff and finish:
// every mandatory delivery terminal, nothing lost, published == fully acknowledged, every
// effect applied exactly once.
func TestPostgresRestart(t *testing.T) {
	if os.Getenv("PGOUTBOX_LOCAL_CLUSTER") != "1" {
		t.Skip("PGOUTBOX_LOCAL_CLUSTER is not 1: the cluster is not the project's own throw-away cluster (scripts/pg.sh); not restarting it")
	}
	pgsh := "../../scripts/pg.sh"
	if out, err := exec.Command(pgsh, "status").CombinedOutput(); err != nil {
		t.Skipf("local cluster not running (%s): %v", strings.TrimSpace(string(out)), err)
	}
	// Restart only the cluster the tests use.
	cmd := exec.Command(pgsh, "url", "postgres")
	cmd.Env = cpEnvWithout("DATABASE_URL")
	local, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lu, err1 := url.Parse(strings.TrimSpace(string(local)))
	du, err2 := url.Parse(os.Getenv("DATABASE_URL"))
	if err1 != nil || err2 != nil || lu.Host != du.Host {
		t.Skipf("DATABASE_URL (%s) is not the local cluster (%s); not restarting it", du.Host, lu.Host)
	}

	bins := procfix.Build(t, t.TempDir())
	w := procfix.SetupWorld(t)
	w.Produce(t, 4) // 53 events, 57 mandatory deliveries
	_, consumerAddr := procfix.StartConsumers(t, bins, w)
	d, metrics := procfix.StartDispatcher(t, bins, w, consumerAddr, procfix.DispatcherOpts{
		Worker: "cp-pgrestart", Lease: "3s", Renewal: true, Batch: 8, Concurrency: 8, Failpoints: "after_claim=pause@2"})
	d.WaitLine(t, "failpoint after_claim hit")
	d.WaitStopped(t) // barrier: mid-run, one batch done, the next claimed and held

	restarted := make(chan error, 1)
	go func() {
		out, err := exec.Command(pgsh, "restart").CombinedOutput()
		if err != nil {
			t.Logf("pg.sh restart: %s", out)
		}
		restarted <- err
	}()
	// Resume the dispatcher once the server refuses connections (shutdown in progress or done).
	sawDown := false
	deadline := time.Now().Add(procfix.Deadline)
	for !sawDown && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, w.ProducerDSN)
		cancel()
		if err != nil {
			sawDown = true
			break
		}
		c.Close(context.Background())
		select {
		case err := <-restarted:
			restarted <- err // restart finished before we saw it down: still resume below
			deadline = time.Time{}
		default:
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := d.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := <-restarted; err != nil {
		t.Fatalf("pg.sh restart: %v", err)
	}
	t.Logf("server seen down before the resume: %v", sawDown)

	att, _ := w.CheckFinal(t) // waits until all terminal, then checks T-3's final state
	if len(att) == 0 {
		t.Fatal("no attempts")
	}
	// The dispatcher noticed the outage (its LISTEN connection was terminated by the shutdown)
	// and reconnected: it finished the work above and still serves metrics (R-DP-4).
	if n := procfix.Scrape(t, metrics, "pgoutbox_dispatcher_database_errors_total"); n < 1 {
		t.Errorf("database_errors_total %v, want the outage counted", n)
	}
	if d.HasExited() {
		t.Fatal("the dispatcher exited during the outage")
	}
	d.Stop(t)
	if d.Err != nil {
		t.Errorf("dispatcher exit after SIGTERM: %v, want a clean drain (exit 0, R-DP-3)", d.Err)
	}
}

func cpEnvWithout(key string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
