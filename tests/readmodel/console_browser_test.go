package readmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/cdp"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// Issue 41: the console driven in headless Chromium through the DevTools protocol (internal/
// pgoutboxtest/cdp): pages are loaded, forms are filled in and submitted by the browser with its
// own cookie and token, and the overview is watched while the database changes.

func cnChromium(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (make chromium installs Debian's package as root); the console is not browser-tested")
	}
	return bin
}

// cnHits is the event ids of the search result rows, in page order.
func cnHits(t *testing.T, p *cdp.Page) []string {
	t.Helper()
	var ids []string
	if err := json.Unmarshal(p.Eval(`Array.from(document.querySelectorAll("#search-results tr.hit")).map(function(r){return r.dataset.eventId})`), &ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

// Issue 41 item 2: the overview updates live. The browser loads it once; an event appended and a
// delivery quarantined afterwards appear in the backlog, the per-destination table and the tiles
// without a reload (a marker set on the loaded document survives), with a newer as-of time.
func TestConsoleBrowserOverviewLive(t *testing.T) {
	t.Parallel()
	bin := cnChromium(t)
	b := cnSetup(t)
	op := b.server(t, true, false)
	p := cdp.Launch(t, bin).NewPage(t, 1280, 900)
	p.Navigate(op.URL + "/console")
	if got := p.Text("refresh-status"); got != "live: updates every 1 s" {
		t.Fatalf("the console script did not run: %q", got)
	}
	m := kernelfix.DestMetering
	for id, want := range map[string]string{"pending-" + m: "2", "leased-" + m: "1", "quarantined-" + m: "1", "tile-backlog": "3",
		"tile-quarantined": "1", "count-" + m + "-acknowledged": "1", "claims-" + m: "running", "rate-" + m: "1", "failures-" + m: "2"} {
		if got := p.Text(id); got != want {
			t.Errorf("overview %s = %q, want %q", id, got, want)
		}
	}
	asOf := p.Eval(`document.getElementById("live-as-of").getAttribute("datetime")`)
	p.Eval(`window.__notReloaded = true`)

	kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-cn-live", 1)
	p.WaitText("pending-"+m, func(s string) bool { return s == "3" }, 30*time.Second)
	if got := p.Text("tile-backlog"); got != "4" {
		t.Errorf("backlog tile after the append = %q, want 4", got)
	}
	c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, m)
	if err := pgcall.QuarantineDelivery(context.Background(), b.Disp, kernelfix.FenceOf(c), "consumer_rejected", "consumer_rejected", nil); err != nil {
		t.Fatal(err)
	}
	p.WaitText("tile-quarantined", func(s string) bool { return s == "2" }, 30*time.Second)
	if got := string(p.Eval(`window.__notReloaded === true`)); got != "true" {
		t.Error("the page was reloaded instead of updated in place")
	}
	if now := p.Eval(`document.getElementById("live-as-of").getAttribute("datetime")`); bytes.Equal(now, asOf) {
		t.Errorf("as-of time did not move: %s", now)
	}
	// the charts are real SVG with a text alternative, the failures chart counts the new quarantine
	var alt string
	_ = json.Unmarshal(p.Eval(`document.querySelector("#chart-failures-`+m+` svg").getAttribute("aria-label")`), &alt)
	if !strings.HasPrefix(alt, "failures (retries and quarantines) per minute over the last hour: total 3") {
		t.Errorf("failures chart %q", alt)
	}
}

// Issue 41 item 3: search by what an operator holds, through the search form in the browser:
// event id, aggregate id, correlation id, operation id, event type (with a time range),
// destination, error code and a time range alone - each finds exactly the expected events, newest
// first; bad input is refused with the reason and a miss says so.
func TestConsoleBrowserSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin := cnChromium(t)
	b := cnSetup(t)
	aud := b.server(t, false, false)
	created := map[string]time.Time{}
	var corr, opID string
	for _, id := range []string{b.retried, b.acked, b.quarantined, b.leased, b.fresh} {
		var at time.Time
		testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT created_at FROM outbox.outbox_events WHERE event_id = $1`, id).Scan(&at))
		created[id] = at
	}
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT correlation_id, operation_id FROM outbox.outbox_events WHERE event_id = $1`, b.acked).Scan(&corr, &opID))
	rfc := func(x time.Time) string { return x.UTC().Format(time.RFC3339Nano) }
	local := func(x time.Time) string { return x.UTC().Format("2006-01-02T15:04:05") }
	all := []string{b.fresh, b.leased, b.quarantined, b.acked, b.retried} // newest first

	p := cdp.Launch(t, bin).NewPage(t, 1280, 900)
	p.Navigate(aud.URL + "/console/search")
	for _, c := range []struct {
		kind, value, from, to string
		want                  []string
	}{
		{"eventId", b.acked, "", "", []string{b.acked}},
		{"aggregateId", "att-cn-b", "", "", []string{b.acked}},
		{"correlationId", corr, "", "", []string{b.acked}},
		{"operationId", opID, "", "", []string{b.acked}},
		{"eventType", kernelfix.Metering, "", "", all},
		{"eventType", kernelfix.Metering, rfc(created[b.acked]), rfc(created[b.leased]), []string{b.quarantined, b.acked}},
		{"destination", kernelfix.DestMetering, "", "", all},
		{"errorCode", "consumer_unavailable", "", "", []string{b.retried}},
		{"errorCode", "consumer_rejected", "", "", []string{b.quarantined}},
		{"timeRange", "", rfc(created[b.acked]), rfc(created[b.quarantined]), []string{b.acked}},
		// the browser's own datetime-local format (seconds, read as UTC)
		{"timeRange", "", local(created[b.retried].Add(-time.Hour)), local(created[b.fresh].Add(time.Hour)), all},
	} {
		// the form as an operator uses it: choose the kind, type the value and the range, submit
		p.Fill("s-kind", c.kind)
		p.Fill("s-q", c.value)
		// a datetime-local control holds whole seconds; the exact bounds of the cases above are
		// typed into the same fields as text (the server reads both forms)
		typ := "datetime-local"
		if strings.HasSuffix(c.from, "Z") || strings.HasSuffix(c.to, "Z") {
			typ = "text"
		}
		p.Eval(`document.getElementById("s-from").type="` + typ + `"; document.getElementById("s-to").type="` + typ + `"; true`)
		p.Fill("s-from", c.from)
		p.Fill("s-to", c.to)
		p.Submit("s-submit")
		if got := cnHits(t, p); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("search %s=%q [%s, %s): %v, want %v", c.kind, c.value, c.from, c.to, got, c.want)
		}
		if c.kind == "destination" {
			var states []string
			_ = json.Unmarshal(p.Eval(`Array.from(document.querySelectorAll("#search-results tr.hit .state")).map(function(e){return e.textContent})`), &states)
			if strings.Join(states, ",") != "pending,leased,quarantined,acknowledged,pending" {
				t.Errorf("destination search states %v", states)
			}
		}
	}
	p.Navigate(aud.URL + "/console/search?kind=eventId&q=not-a-uuid")
	if got := p.Text("search-error"); !strings.Contains(got, "eventId is a UUID") {
		t.Errorf("bad event id: %q", got)
	}
	p.Navigate(aud.URL + "/console/search?kind=aggregateId&q=att-cn-none")
	if got := p.Text("search-none"); !strings.HasPrefix(got, "Nothing found for aggregateId") {
		t.Errorf("miss: %q", got)
	}
	// from a delivery's event page the ids it holds are links to the search
	p.Navigate(aud.URL + "/console/event?id=" + b.retried)
	p.Eval(`document.querySelector('a[href^="/console/search?kind=errorCode"]').click(); true`)
	p.WaitText("search-results", func(s string) bool { return strings.Contains(s, b.retried) }, 30*time.Second)
}

// Issue 41 item 4: the actions where the operator looks, in the browser, each audited (checked in
// SQL): pause a destination's claims with a reason from the overview (the claim then hands out
// nothing), resume them, re-deliver from the quarantine list; the command-line equivalent is on
// the page with a copy button. The auditor's browser sees no form, and a POST without the
// browser's token changes nothing.
func TestConsoleBrowserActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin := cnChromium(t)
	b := cnSetup(t)
	op := b.server(t, true, false)
	aud := b.server(t, false, false)
	m := kernelfix.DestMetering
	var login string
	testfix.Must(t, b.op.QueryRow(ctx, `SELECT session_user`).Scan(&login))
	pauseLog := func() string {
		var s string
		testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT coalesce(string_agg(action || ':' || coalesce(reason, '') || ':' || changed_by, ',' ORDER BY log_id), '')
			FROM outbox.destination_claim_pause_log WHERE destination = $1`, m).Scan(&s))
		return s
	}

	br := cdp.Launch(t, bin)
	p := br.NewPage(t, 1280, 900)
	p.Navigate(op.URL + "/console")
	p.Fill("pause-reason-"+m, "INC-41 consumer deploy")
	p.Submit("pause-" + m)
	if got := p.Text("claims-state"); got != "paused" {
		t.Fatalf("after pause the page says %q", got)
	}
	if got := pauseLog(); got != "pause:INC-41 consumer deploy:"+login {
		t.Errorf("audit after pause %q", got)
	}
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, m); len(cs) != 0 {
		t.Errorf("a paused destination handed out %d deliveries", len(cs))
	}
	p.Navigate(op.URL + "/console")
	if got := p.Text("claims-" + m); !strings.HasPrefix(got, "paused") || !strings.Contains(got, "INC-41 consumer deploy") {
		t.Errorf("overview claims cell %q", got)
	}
	if got := p.Text("tile-paused"); got != "1" {
		t.Errorf("paused tile %q", got)
	}
	p.Submit("resume-" + m)
	if got := p.Text("claims-state"); got != "running" {
		t.Fatalf("after resume the page says %q", got)
	}
	if got := pauseLog(); got != "pause:INC-41 consumer deploy:"+login+",resume::"+login {
		t.Errorf("audit after resume %q", got)
	}
	if cs := kernelfix.Claim(t, b.Disp, kernelfix.WorkerA, 10, kernelfix.LongLease, m); len(cs) != 2 {
		t.Errorf("after resume the claim handed out %d deliveries, want the 2 pending", len(cs))
	}

	// the quarantined list of the destination shows exactly the quarantined delivery
	p.Navigate(op.URL + "/console/deliveries?destination=" + m + "&state=quarantined")
	if dom := p.HTML(); !strings.Contains(dom, b.quarantined) || strings.Contains(dom, b.retried) {
		t.Error("the quarantined filter does not show exactly the quarantined delivery")
	}
	// re-deliver from the quarantine list
	p.Navigate(op.URL + "/console/quarantine")
	if !strings.Contains(p.HTML(), `<label for="case-q0-0">Case id</label>`) || !strings.Contains(p.Text("qg-0"), "consumer_rejected") {
		t.Error("the operator's quarantine page lacks the labelled form or the group")
	}
	var cmd string
	_ = json.Unmarshal(p.Eval(`(function(){var b=document.querySelector("article.qitem button.copy");return b&&!b.hidden?b.dataset.copy:""})()`), &cmd)
	if !strings.HasPrefix(cmd, "outboxctl quarantine redeliver "+m+" "+b.quarantined+" --case CASE-ID --reason 'REASON' --key console-") {
		t.Errorf("copyable command %q", cmd)
	}
	p.Fill("case-q0-0", "CASE-41")
	p.Fill("reason-q0-0", "consumer fixed")
	p.Submit("redeliver-q0-0")
	if got := p.Text("new-status"); got != "pending" {
		t.Fatalf("after re-delivery the page says %q", got)
	}
	if n, cases := cnRecoveries(t, b.Admin, b.quarantined); n != 1 || cases != "CASE-41" {
		t.Errorf("audit: %d recoveries, cases %q", n, cases)
	}
	p.Navigate(op.URL + "/console/event?id=" + b.quarantined)
	if got := p.Text("status-" + m); got != "pending" {
		t.Errorf("after the re-delivery the event page shows %q", got)
	}

	// the auditor: no form anywhere, every POST 405, nothing written
	pa := br.NewPage(t, 1280, 900)
	for _, u := range []string{"/console", "/console/quarantine", "/console/event?id=" + b.quarantined} {
		pa.Navigate(aud.URL + u)
		if n := string(pa.Eval(`document.querySelectorAll('form[method="post"]').length`)); n != "0" {
			t.Errorf("auditor page %s has %s write forms", u, n)
		}
	}
	form := url.Values{"destination": {m}, "reason": {"x"}}
	for _, path := range []string{"/console/pause", "/console/resume"} {
		if code, _ := cnPost(t, nil, aud.URL+path, form, nil); code != http.StatusMethodNotAllowed {
			t.Errorf("auditor POST %s = %d, want 405", path, code)
		}
		if code, _ := cnPost(t, nil, op.URL+path, form, nil); code != http.StatusForbidden {
			t.Errorf("operator POST %s without the browser's token = %d, want 403", path, code)
		}
	}
	if got := pauseLog(); strings.Count(got, ",") != 1 {
		t.Errorf("refused POSTs wrote to the audit: %q", got)
	}
}

// Issue 41 "done means": screenshots of each view in both themes (the system's preference,
// emulated) at 1280 px, and the overview on a narrow screen; with -update-goldens they are
// written to docs/ (palette PNGs, small). The dark theme really changes the page background.
func TestConsoleBrowserScreenshots(t *testing.T) {
	t.Parallel()
	bin := cnChromium(t)
	b := cnSetup(t)
	op := b.server(t, true, false)
	kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-cn-f", 1)
	views := []struct{ name, path string }{
		{"overview", "/console"},
		{"search", "/console/search?kind=destination&q=" + kernelfix.DestMetering},
		{"event", "/console/event?id=" + b.quarantined},
		{"deliveries", "/console/deliveries?destination=" + kernelfix.DestMetering + "&state=pending"},
		{"quarantine", "/console/quarantine"},
	}
	br := cdp.Launch(t, bin)
	p := br.NewPage(t, 1280, 900)
	bg := map[string]string{}
	for _, scheme := range []string{"light", "dark"} {
		p.ColorScheme(scheme)
		for _, v := range views {
			p.Navigate(op.URL + v.path)
			if v.name == "overview" {
				var c string
				_ = json.Unmarshal(p.Eval(`getComputedStyle(document.documentElement).backgroundColor`), &c)
				bg[scheme] = c
			}
			cnShot(t, p.Screenshot(v.name == "overview"), "console-"+v.name+"-"+scheme+".png")
		}
	}
	if bg["light"] == bg["dark"] || bg["light"] == "" {
		t.Errorf("the dark theme does not follow the system: background light %q, dark %q", bg["light"], bg["dark"])
	}
	p.ColorScheme("light")
	p.Viewport(390, 844)
	p.Navigate(op.URL + "/console")
	var overflow bool
	_ = json.Unmarshal(p.Eval(`document.documentElement.scrollWidth > window.innerWidth + 1`), &overflow)
	if overflow {
		t.Error("the overview overflows a 390 px screen sideways (tables must scroll inside their box)")
	}
	cnShot(t, p.Screenshot(false), "console-overview-narrow.png")
}

// cnShot checks a screenshot and, with -update-goldens, writes it to docs/ as a palette PNG.
func cnShot(t *testing.T, raw []byte, name string) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil || img.Bounds().Dx() < 300 {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !*updateGoldens {
		return
	}
	pal := image.NewPaletted(img.Bounds(), cnPalette(img))
	draw.Draw(pal, pal.Bounds(), img, image.Point{}, draw.Src)
	var out bytes.Buffer
	testfix.Must(t, (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, pal))
	testfix.Must(t, os.WriteFile(filepath.Join("../..", "docs", name), out.Bytes(), 0o644))
	t.Logf("wrote docs/%s (%s bytes)", name, strconv.Itoa(out.Len()))
}

// cnPalette is the 256 most frequent colours of a screenshot (a UI has few; the rest are
// anti-aliasing, mapped to the nearest).
func cnPalette(img image.Image) color.Palette {
	n := map[color.RGBA]int{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			n[c]++
		}
	}
	cs := make([]color.RGBA, 0, len(n))
	for c := range n {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if n[cs[i]] != n[cs[j]] {
			return n[cs[i]] > n[cs[j]]
		}
		a, b := cs[i], cs[j]
		return uint32(a.R)<<16|uint32(a.G)<<8|uint32(a.B) < uint32(b.R)<<16|uint32(b.G)<<8|uint32(b.B)
	})
	if len(cs) > 256 {
		cs = cs[:256]
	}
	pal := make(color.Palette, len(cs))
	for i, c := range cs {
		pal[i] = c
	}
	return pal
}
