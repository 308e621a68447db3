package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/wire"
)

// dpBuildDispatcher builds cmd/dispatcher into a temporary directory.
func dpBuildDispatcher(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dispatcher")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/oceanway/pgoutbox/cmd/dispatcher")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// R-DP-3, R-DP-5, R-DP-6: the real binary, SIGTERM during in-flight work. Three deliveries are in
// flight when the signal arrives; the dispatcher stops claiming, lets the two that finish within
// the grace period be acknowledged, leaves the third (still running at the deadline) to lease
// expiry, and exits 0. Nothing is acknowledged that the consumer did not answer; nothing more is
// claimed after the signal. Every log line is JSON and carries no secret, password or payload.
func TestDispatcherBinarySIGTERMDrains(t *testing.T) {
	t.Parallel()
	bin := dpBuildDispatcher(t)
	db := dispatcherfix.Setup(t)
	var ids []string
	for i := 0; i < 6; i++ {
		ids = append(ids, db.AppendMetering(t))
	}

	release := make(chan struct{})
	var mu sync.Mutex
	order := map[string]int{}
	c := dispatcherfix.NewConsumer(func(call int, d wire.Delivery) dispatcherfix.Reply {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := order[d.EventID]; !ok {
			order[d.EventID] = len(order) + 1
		}
		if order[d.EventID] <= 2 {
			return dispatcherfix.Reply{Kind: "ack", Wait: release}
		}
		return dispatcherfix.Reply{Kind: "block"} // still running when the grace period ends
	})
	c.Started = make(chan wire.Delivery, 16)
	srv, _ := dispatcherfix.HTTPConsumer(t, c, time.Minute)

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "dispatcher.toml")
	cfgText := `mode = "production"
worker_name = "dp-drain"
concurrency = 3
# no claim-ahead: exactly the three deliveries in flight are claimed (with prefetch, the claimed-
# ahead ones would be delivered within the grace or, as here, left to lease expiry)
prefetch = 0
batch_size = 10
lease = "60s"
shutdown_grace = "3s"
poll_interval = "200ms"
database_role = "outbox_dispatcher"
metrics_address = "127.0.0.1:0"
log_level = "debug"

[destinations.metering_input_processor]
transport = "http"
url = "` + srv.URL + `/deliver"
auth = "hmac"
secret_env = "DP_TEST_SECRET"
timeout = "60s"
`
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", cfgPath)
	cmd.Env = []string{"PGOUTBOX_DATABASE_URL=" + db.Dsn, "DP_TEST_SECRET=" + dispatcherfix.Secret}
	lines := make(chan string, 4096)
	lw := &dpLineWriter{lines: lines}
	cmd.Stderr = lw // exec copies until EOF before Wait returns: no line is lost
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitLog := func(msg string) {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("log channel closed before %q", msg)
				}
				if strings.Contains(l, `"msg":"`+msg) {
					return
				}
			case <-timeout:
				t.Fatalf("no log %q", msg)
			}
		}
	}

	for i := 0; i < 3; i++ {
		select {
		case <-c.Started:
		case <-time.After(60 * time.Second):
			t.Fatal("deliveries did not start")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog("draining: claiming stopped") // barrier: the claim loop has ended
	close(release)                        // the first two consumer calls answer now

	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("exit code %d, want 0", ee.ExitCode())
		} else if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dispatcher did not exit after SIGTERM")
	}

	var acked, leased, pending []string
	for _, id := range ids {
		switch db.Status(t, dispatcherfix.MeteringDest, id) {
		case "acknowledged":
			acked = append(acked, id)
		case "leased":
			leased = append(leased, id)
		case "pending":
			pending = append(pending, id)
		}
	}
	if len(acked) != 2 || len(leased) != 1 || len(pending) != 3 {
		t.Fatalf("acknowledged %d leased %d pending %d, want 2/1/3", len(acked), len(leased), len(pending))
	}
	for _, id := range acked {
		if c.AppliedFor(id) != 1 {
			t.Fatalf("acknowledged %s but the consumer did not answer it", id)
		}
	}
	if c.AppliedFor(leased[0]) != 0 {
		t.Fatal("the abandoned delivery was answered?")
	}
	// The abandoned delivery keeps its open attempt (no finish) for recovery after lease expiry.
	if a := db.Attempts(t, dispatcherfix.MeteringDest, leased[0]); len(a) != 1 || a[0].Outcome != "" {
		t.Fatalf("abandoned delivery attempts %+v", a)
	}
	for _, id := range pending {
		if n := db.Count(t, `SELECT attempt_count FROM outbox.outbox_deliveries WHERE event_id = $1::uuid`, id); n != 0 {
			t.Fatal("a delivery was claimed after SIGTERM")
		}
	}
	if c.BadSig != 0 {
		t.Fatal("HMAC signature rejected")
	}

	// R-DP-5: JSON logs, sanitized.
	logs := lw.all()
	sawAbandon := false
	for _, l := range logs {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		for _, bad := range []string{dispatcherfix.Secret, ":pgoutbox_test@", `"note"`, "sample", db.Dsn} {
			if strings.Contains(l, bad) {
				t.Fatalf("log line leaks %q: %s", bad, l)
			}
		}
		if m["msg"] == "delivery aborted by shutdown; left to lease expiry" {
			sawAbandon = true
		}
	}
	if !sawAbandon {
		t.Fatal("no log of the delivery left to lease expiry")
	}
	var tokens []string
	rows, _ := db.Admin.Query(context.Background(), `SELECT lease_token::text FROM outbox.outbox_delivery_attempt_starts`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		tokens = append(tokens, s)
	}
	rows.Close()
	for _, l := range logs {
		for _, tok := range tokens {
			if strings.Contains(l, tok) {
				t.Fatal("log line leaks a lease token")
			}
		}
	}
}

// R-DP-6: the binary refuses an unsafe start with a clear message and exit code 2: a config
// out of range, the in-process transport in production, no active delivery set.
func TestDispatcherBinaryRefusesUnsafeStart(t *testing.T) {
	t.Parallel()
	bin := dpBuildDispatcher(t)
	bare := dispatcherfix.DatabaseURL(t) // migrated, nothing active
	dir := t.TempDir()
	run := func(cfgText string, dsn string) (int, string) {
		p := filepath.Join(dir, "c.toml")
		if err := os.WriteFile(p, []byte(cfgText), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-config", p)
		cmd.Env = []string{"PGOUTBOX_DATABASE_URL=" + dsn, "DP_TEST_SECRET=" + dispatcherfix.Secret}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		return 0, string(out)
	}
	dest := "\n[destinations.metering_input_processor]\ntransport = \"http\"\nurl = \"http://127.0.0.1:1/x\"\nauth = \"hmac\"\nsecret_env = \"DP_TEST_SECRET\"\n"
	cases := []struct{ cfg, want string }{
		{"batch_size = 5000\n" + dest, "batch_size = 5000 is out of range [1, 1000]"},
		{"mode = \"production\"\n[destinations.metering_input_processor]\ntransport = \"inprocess\"\n", "refused in production mode (R-DP-6)"},
		{"database_role = \"outbox_dispatcher\"\n" + dest, "no active delivery set"},
	}
	for _, c := range cases {
		code, out := run(c.cfg, bare)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("config %q: exit %d, output %q; want exit 2 with %q", c.cfg, code, out, c.want)
		}
		if strings.Contains(out, dispatcherfix.Secret) {
			t.Error("output leaks the secret")
		}
	}
}

// dpLineWriter collects a process's stderr by lines and forwards each to lines (non-blocking).
type dpLineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	logs  []string
	lines chan string
}

func (w *dpLineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		l := string(w.buf.Next(i + 1))
		l = strings.TrimRight(l, "\n")
		w.logs = append(w.logs, l)
		select {
		case w.lines <- l:
		default:
		}
	}
}

func (w *dpLineWriter) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.logs...)
}
