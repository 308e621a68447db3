package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/canon"
	"github.com/oceanway/pgoutbox/internal/config"
	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/dispatcherfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/transport"
	"github.com/oceanway/pgoutbox/wire"
)

const nodeConsumerDir = "../../examples/node-consumer"

// startNodeConsumer runs examples/node-consumer/server.js (installed by `make node-deps`, which
// `make test` runs) and returns its base URL. Skips only when node itself is absent.
func startNodeConsumer(t *testing.T, env ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the second-language consumer test needs Node.js >= 18 (make node-deps installs its packages)")
	}
	if _, err := os.Stat(filepath.Join(nodeConsumerDir, "node_modules", "ajv")); err != nil {
		// `make test` installs them first (make node-deps); a bare `go test` does it here.
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatalf("examples/node-consumer/node_modules missing and npm not found: run make node-deps")
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = nodeConsumerDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in examples/node-consumer (make node-deps): %v\n%s", err, out)
		}
	}
	cmd := exec.Command(node, "server.js")
	cmd.Dir = nodeConsumerDir
	cmd.Env = append(os.Environ(), append([]string{"PORT=0"}, env...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("node consumer stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	re := regexp.MustCompile(`listening on (127\.0\.0\.1:[0-9]+)`)
	select {
	case l := <-lines:
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("node consumer said %q", l)
		}
		return "http://" + m[1]
	case <-time.After(30 * time.Second):
		t.Fatalf("node consumer did not start: %s", stderr.String())
	}
	return ""
}

// Issue 12 (a consumer in another language from the repository's docs and contracts alone),
// R-DP-2, R-AK-1, R-AK-1a, R-AK-2, R-SEC-5: the Node consumer of examples/node-consumer
// (RFC 8785 with `canonicalize`, the published schemas with ajv) serves a destination of the
// real dispatcher over HTTP with the v1 HMAC signature; every delivery is acknowledged with a
// receipt the kernel accepted and the audit sweep re-verifies, and every event is published.
// The Node consumer also refuses a replayed and a stale signed request, as the transport doc
// requires.
func TestNodeConsumerWithDispatcher(t *testing.T) {
	t.Parallel()
	url := startNodeConsumer(t, "PGOUTBOX_HMAC_SECRET="+dispatcherfix.Secret)

	// The signature scheme first, against the Node consumer directly.
	env := testfix.Envelope(dispatcherfix.MeteringType, "1", "agg-node-replay", 1)
	raw, _ := json.Marshal(env)
	d := wire.Delivery{Destination: dispatcherfix.MeteringDest, ConsumerName: "metering_input_processor_consumer",
		EventID: env["eventId"].(string), AttemptID: testfix.NewUUID(), AttemptNumber: 1,
		ExpectedReceiptType: "MeteringInputProcessorConsumerReceipt", ExpectedReceiptSchemaVersion: 1}
	cd := canonicalFor(t, raw)
	d.Envelope, d.EnvelopeSHA256 = cd.bytes, cd.sha
	post := func(ts int64) (int, wire.HTTPErrorBody) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.Envelope))
		wire.SetHeaders(req.Header, d)
		req.Header.Set(wire.HeaderSignature, wire.SignRequest([]byte(dispatcherfix.Secret), ts, req.Header, d.Envelope))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var e wire.HTTPErrorBody
		_ = json.Unmarshal(body, &e)
		return resp.StatusCode, e
	}
	now := time.Now().Unix()
	if s, e := post(now); s != http.StatusOK {
		t.Fatalf("fresh signed request: %d %+v, want 200", s, e)
	}
	if s, e := post(now); s != http.StatusUnauthorized || e.Ref != "replayed_signature" {
		t.Fatalf("replayed request: %d %+v, want 401 replayed_signature", s, e)
	}
	if s, e := post(now - 301); s != http.StatusUnauthorized || e.Ref != "stale_signature" {
		t.Fatalf("stale request: %d %+v, want 401 stale_signature", s, e)
	}

	// Then the real dispatcher.
	db := dispatcherfix.Setup(t)
	h, err := transport.NewHTTP(transport.HTTPOptions{URL: url, Timeout: 10 * time.Second, Auth: config.AuthHMAC, Secret: config.NewSecret([]byte(dispatcherfix.Secret))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := dispatcherfix.Config("dp-node", map[string]config.Destination{dispatcherfix.MeteringDest: dispatcherfix.HTTPDest(url)})
	dispatcherfix.Start(t, db, cfg, map[string]transport.Transport{dispatcherfix.MeteringDest: h})
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, db.AppendMetering(t))
	}
	dispatcherfix.Eventually(t, "every event published", func() bool {
		return db.Count(t, `SELECT count(*) FROM outbox.outbox_publications`) == len(ids)
	})
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_deliveries
		WHERE status = 'acknowledged' AND ack_receipt_kind = 'metering_input_processor'
		  AND ack_receipt_ref = 'metering_input_processor_consumer:' || event_id::text
		  AND ack_receipt_digest ~ '^[0-9a-f]{64}$'`); n != len(ids) {
		t.Fatalf("%d of %d deliveries acknowledged with the Node consumer's receipt", n, len(ids))
	}
	// Every attempt succeeded at once: nothing was refused by the kernel (no invalid_ack).
	if n := db.Count(t, `SELECT count(*) FROM outbox.outbox_delivery_attempt_finishes WHERE outcome <> 'acknowledged'`); n != 0 {
		t.Fatalf("%d attempts did not end acknowledged", n)
	}
	probs, err := pgcall.VerifyAckDigests(context.Background(), db.Admin, 1000)
	if err != nil || len(probs) != 0 {
		t.Fatalf("verify_ack_digests: %v %+v", err, probs)
	}
}

type canonDoc struct {
	bytes []byte
	sha   string
}

func canonicalFor(t *testing.T, raw []byte) canonDoc {
	t.Helper()
	b, sha, err := canon.CanonicalizeDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	return canonDoc{b, sha}
}
