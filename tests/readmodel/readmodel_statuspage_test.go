package readmodel

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/readmodel"
)

// rmChromium runs Debian's chromium headless with args and returns its stdout.
func rmChromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--disable-extensions", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// R-OP-4, R-OP-3: the status page in a real headless Chromium against a live database with
// known state: per destination pending / leased / quarantine with reasons, the active quartet,
// the latest proof with its freshness, and a search result through the search box's GET form.
// Read-only: every other method is 405, no payload is rendered, the server refuses a session
// that could write. The gauges report the proof's receipt anti-join and freshness per scope.
// With -update-goldens the screenshot docs/status-page.png is rewritten.
func TestStatusPageChromium(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (make chromium installs Debian's package as root); the status page is not browser-tested")
	}
	b := rmSetup(t)
	var metering []string
	for i := 0; i < 4; i++ {
		metering = append(metering, kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-sp-"+string(rune('a'+i)), 1))
	}
	kernelfix.Append(t, b.Admin, kernelfix.RunCreated, "run-sp-1", 1) // core_operations: 1 pending
	cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 2, kernelfix.LongLease, kernelfix.DestMetering)
	if len(cs) != 2 {
		t.Fatalf("claimed %d", len(cs))
	}
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(cs[0]), "unsupported_schema", "unsupported_schema", nil); err != nil {
		t.Fatal(err)
	}
	proof := rmTake(t, b.aud, `{}`)

	pc, err := pgxpool.ParseConfig(b.Dsn)
	testfix.Must(t, err)
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE outbox_auditor")
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	testfix.Must(t, err)
	t.Cleanup(pool.Close)
	if err := readmodel.CheckAuditorOnly(ctx, pool); err != nil {
		t.Fatalf("auditor session refused: %v", err)
	}
	if err := readmodel.CheckAuditorOnly(ctx, b.Admin); err == nil {
		t.Fatal("a superuser session was accepted as auditor-only")
	}
	if err := readmodel.CheckAuditorOnly(ctx, b.Disp); err == nil {
		t.Fatal("a dispatcher session was accepted as auditor-only")
	}
	srv := httptest.NewServer(&readmodel.Server{DB: pool, Gauges: readmodel.NewGauges()})
	t.Cleanup(srv.Close)

	dom := rmChromium(t, bin, "--dump-dom", srv.URL+"/status")
	cell := func(id string) string {
		t.Helper()
		m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("no element %s in the rendered page:\n%s", id, dom)
		}
		return strings.TrimSpace(m[1])
	}
	for id, want := range map[string]string{
		"pending-metering_input_processor":     "2",
		"leased-metering_input_processor":      "1",
		"quarantined-metering_input_processor": "1",
		"reasons-metering_input_processor":     "unsupported_schema: 1",
		"pending-core_operations":              "1",
		"leased-core_operations":               "0",
		"quarantined-core_operations":          "0",
		"active-version":                       "1",
		"proof-status-0":                       rmPartial,
		"proof-freshness-0":                    "verified_current",
		"proof-members-0":                      "5",
		"proof-antijoin-0":                     "1",
	} {
		if got := cell(id); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if cell("active-digest") == "" || strings.Contains(dom, "sample") || strings.Contains(dom, "\"note\"") {
		t.Errorf("page shows no quartet digest, or shows payload content")
	}
	if strings.Contains(strings.ToLower(dom), `method="post"`) {
		t.Error("the page has a write form")
	}

	// The search box: a GET form; Chromium renders the answer.
	dom = rmChromium(t, bin, "--dump-dom", srv.URL+"/status?"+url.Values{"kind": {"eventId"}, "id": {metering[2]}}.Encode())
	if !strings.Contains(dom, `<td class="result">matched</td>`) || !strings.Contains(dom, metering[2]) {
		t.Fatalf("search result not rendered:\n%s", dom)
	}
	dom = rmChromium(t, bin, "--dump-dom", srv.URL+"/status?"+url.Values{"kind": {"runId"}, "id": {"run-nowhere"}}.Encode())
	if !strings.Contains(dom, `<td class="result">inconclusive</td>`) || !strings.Contains(dom, `<td class="reason">pending_deliveries</td>`) {
		t.Fatalf("inconclusive search not rendered:\n%s", dom)
	}

	// Read-only: no other method.
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, srv.URL+"/status", strings.NewReader("kind=eventId&id=x"))
		resp, err := http.DefaultClient.Do(req)
		testfix.Must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /status = %d, want 405", m, resp.StatusCode)
		}
	}
	// Gauges: anti-join 1 and verified_current for scope {}.
	resp, err := http.Get(srv.URL + "/metrics")
	testfix.Must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`pgoutbox_readmodel_receipt_antijoin_events{scope="{}"} 1`,
		`pgoutbox_readmodel_proof_verified_current{scope="{}"} 1`, `pgoutbox_readmodel_proof_complete{scope="{}"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	// A new event: the proof is stale on the page and in the gauges.
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-sp-late", 1)
	dom = rmChromium(t, bin, "--dump-dom", srv.URL+"/status")
	if got := cell("proof-freshness-0"); got != "stale (source_changed)" {
		t.Errorf("after a new event the page says %q", got)
	}
	_ = proof

	shot := filepath.Join(t.TempDir(), "status.png")
	rmChromium(t, bin, "--screenshot="+shot, "--window-size=1400,860", "--hide-scrollbars",
		srv.URL+"/status?"+url.Values{"kind": {"eventId"}, "id": {metering[2]}}.Encode())
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot: %d bytes, %v", len(png), err)
	}
	if *updateGoldens {
		testfix.Must(t, os.WriteFile(filepath.Join("../..", "docs", "status-page.png"), png, 0o644))
	}
}
