package readmodel

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/kernelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/readmodelfix"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testdb"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
	"github.com/oceanway/pgoutbox/internal/readmodel"
)

// cnBundle: a database with metering deliveries in every state, and the console's pools.
type cnBundle struct {
	kernelfix.Bundle
	aud, op *pgxpool.Pool // SET ROLE outbox_auditor / outbox_operator
	// retried (pending, one retryable attempt), acked, quarantined, leased, fresh (pending, no attempt)
	retried, acked, quarantined, leased, fresh string
	ackedClaim                                 pgcall.ClaimedDelivery
}

func cnPool(t *testing.T, dsn, role string) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dsn)
	testfix.Must(t, err)
	pc.MaxConns = 3
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE "+role)
		return err
	}
	p, err := pgxpool.NewWithConfig(context.Background(), pc)
	testfix.Must(t, err)
	t.Cleanup(p.Close)
	return p
}

func cnSetup(t *testing.T) cnBundle {
	t.Helper()
	ctx := context.Background()
	b := cnBundle{Bundle: kernelfix.Setup(t)}
	b.aud, b.op = cnPool(t, b.Dsn, "outbox_auditor"), cnPool(t, b.Dsn, "outbox_operator")
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-cn-"+string(rune('a'+i)), 1)
	}
	b.retried, b.acked, b.quarantined, b.leased, b.fresh = ids[0], ids[1], ids[2], ids[3], ids[4]
	claim := func(want string) pgcall.ClaimedDelivery {
		c := kernelfix.ClaimOne(t, b.Disp, kernelfix.WorkerA, kernelfix.LongLease, kernelfix.DestMetering)
		if c.EventID != want {
			t.Fatalf("fixture: claimed %s, want %s", c.EventID, want)
		}
		return c
	}
	ref := "consumer-timeout-ref-7"
	if _, err := pgcall.RetryDelivery(ctx, b.Disp, kernelfix.FenceOf(claim(b.retried)), "consumer_unavailable", &ref); err != nil {
		t.Fatal(err)
	}
	b.ackedClaim = claim(b.acked)
	kernelfix.Ack(t, b.Disp, b.ackedClaim)
	if err := pgcall.QuarantineDelivery(ctx, b.Disp, kernelfix.FenceOf(claim(b.quarantined)), "consumer_rejected", "consumer_rejected", nil); err != nil {
		t.Fatal(err)
	}
	claim(b.leased)
	return b
}

func (b cnBundle) server(t *testing.T, operator, payloads bool) *httptest.Server {
	t.Helper()
	s := &readmodel.Server{DB: b.aud, Gauges: readmodel.NewGauges(), ShowPayloads: payloads, LiveInterval: time.Second}
	if operator {
		if err := readmodel.CheckOperatorOnly(context.Background(), b.op); err != nil {
			t.Fatalf("operator session refused: %v", err)
		}
		s.Operator = b.op
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// Issue 25 item 1 (R-OP-4, R-AK-1..10): the delivery detail by event id shows the envelope
// digest and metadata, the delivery-set quartet, the publication, every delivery's frozen
// member and state, every attempt start and finish (outcome, error code, sanitized ref,
// worker, times) and the receipt quartet; the payload is hidden unless the server allows it
// and the request asks; lease tokens never appear.
func TestConsoleEventDetail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := cnSetup(t)
	srv := b.server(t, false, false)

	code, page := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/event?id="+b.retried)
	if code != 200 {
		t.Fatalf("GET event = %d:\n%s", code, page)
	}
	var sha, lease string
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT e.event_envelope_sha256, s.lease_token::text FROM outbox.outbox_events e
		JOIN outbox.outbox_delivery_attempt_starts s ON s.event_id = e.event_id WHERE e.event_id = $1`, b.retried).Scan(&sha, &lease))
	if got := readmodelfix.ConsoleElem(t, page, "envelope-digest"); got != "jcs-sha256-v1:"+sha {
		t.Errorf("envelope digest %q, want %s", got, sha)
	}
	if got := readmodelfix.ConsoleElem(t, page, "event-type"); got != kernelfix.Metering+" (schema 1)" {
		t.Errorf("type %q", got)
	}
	if got := readmodelfix.ConsoleElem(t, page, "status-"+kernelfix.DestMetering); got != "pending" {
		t.Errorf("metering status %q", got)
	}
	if got := readmodelfix.ConsoleElem(t, page, "member-"+kernelfix.DestMetering); !strings.Contains(got, "consumer metering_input_processor") || !strings.Contains(got, "mandatory") {
		t.Errorf("frozen member %q", got)
	}
	if !strings.Contains(readmodelfix.ConsoleElem(t, page, "event-quartet"), "version 1") {
		t.Errorf("no delivery-set quartet")
	}
	att := regexp.MustCompile(`(?s)id="attempts-` + kernelfix.DestMetering + `".*?</table>`).FindString(page)
	for _, want := range []string{kernelfix.WorkerA, "retryable", "retry_scheduled", "consumer_unavailable", "consumer-timeout-ref-7"} {
		if !strings.Contains(att, want) {
			t.Errorf("attempt history lacks %q:\n%s", want, att)
		}
	}
	if strings.Contains(page, lease) {
		t.Error("the page shows a lease token")
	}
	if got := readmodelfix.ConsoleElem(t, page, "publication"); !strings.HasPrefix(got, "not published") {
		t.Errorf("publication %q", got)
	}
	if got := readmodelfix.ConsoleElem(t, page, "payload"); !strings.HasPrefix(got, "hidden") || strings.Contains(page, `"note"`) || strings.Contains(page, "sample") {
		t.Errorf("payload not hidden: %q", got)
	}
	// ?payload=show is ignored by a console started without -show-payloads.
	if _, p := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/event?payload=show&id="+b.retried); strings.Contains(p, "payload-body") {
		t.Error("payload shown although the server does not allow payloads")
	}

	// The acknowledged delivery: its receipt quartet as stored.
	_, page = readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/event?id="+b.acked)
	var ref, digest string
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT ack_receipt_ref, ack_receipt_digest FROM outbox.outbox_deliveries
		WHERE destination = $1 AND event_id = $2`, kernelfix.DestMetering, b.acked).Scan(&ref, &digest))
	rc := readmodelfix.ConsoleElem(t, page, "receipt-"+kernelfix.DestMetering)
	for _, want := range []string{ref, digest, "jcs-sha256-v1", "schema 1"} {
		if !strings.Contains(rc, want) {
			t.Errorf("receipt quartet %q lacks %q", rc, want)
		}
	}
	if !strings.Contains(readmodelfix.ConsoleText(page), "acknowledged") {
		t.Error("no acknowledged outcome")
	}
	// The quarantined one: the preview, and no form on the read-only console.
	_, page = readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/event?id="+b.quarantined)
	if got := readmodelfix.ConsoleElem(t, page, "quarantine-"+kernelfix.DestMetering); !strings.HasPrefix(got, "consumer_rejected since") {
		t.Errorf("quarantine %q", got)
	}
	if got := readmodelfix.ConsoleElem(t, page, "preview-"+kernelfix.DestMetering); !strings.Contains(got, "quarantined -> pending") {
		t.Errorf("preview %q", got)
	}
	if strings.Contains(strings.ToLower(page), "<form method=\"post\"") {
		t.Error("the read-only console renders a write form")
	}
	// Unknown and malformed ids.
	if code, _ := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/event?id=00000000-0000-4000-8000-000000000000"); code != 404 {
		t.Errorf("unknown event = %d, want 404", code)
	}
	if code, _ := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/event?id=not-a-uuid"); code != 400 {
		t.Errorf("malformed id = %d, want 400", code)
	}

	// A console allowed to show payloads shows it on request only.
	psrv := b.server(t, false, true)
	_, page = readmodelfix.ConsoleGet(t, nil, psrv.URL+"/console/event?id="+b.retried)
	if strings.Contains(page, "payload-body") || !strings.Contains(page, `id="show-payload"`) {
		t.Error("payload shown by default, or no link to show it")
	}
	_, page = readmodelfix.ConsoleGet(t, nil, psrv.URL+"/console/event?payload=show&id="+b.retried)
	if body := readmodelfix.ConsoleElem(t, page, "payload-body"); !strings.Contains(body, "{") {
		t.Errorf("payload not shown on request: %q", body)
	}
	// Only the auditor may read a payload; the operator and the dispatcher may not.
	for _, role := range []*pgxpool.Pool{b.op} {
		if _, err := pgcall.ConsoleEventPayload(ctx, role, b.retried); pgcall.SQLState(err) != "42501" {
			t.Errorf("operator read a payload: %v", err)
		}
	}
	if _, err := pgcall.ConsoleEventByID(ctx, b.Disp, b.retried); pgcall.SQLState(err) != "42501" {
		t.Errorf("dispatcher may call console_event: %v", err)
	}
}

// Issue 25 item 2: lists per destination and state, oldest first, keyset-paged (the next link
// carries the last row's (created_at, event_id); no OFFSET), each row linking to the detail;
// counts per state; the SQL refuses half a cursor and bad limits.
func TestConsoleListsKeyset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := cnSetup(t)
	for i := 0; i < 6; i++ {
		kernelfix.Append(t, b.Admin, kernelfix.Metering, "att-cn-more-"+string(rune('a'+i)), 1)
	}
	srv := b.server(t, false, false)
	var want []string
	rows, err := b.Admin.Query(ctx, `SELECT event_id::text FROM outbox.outbox_deliveries
		WHERE destination = $1 AND status = 'pending' ORDER BY created_at, event_id`, kernelfix.DestMetering)
	testfix.Must(t, err)
	for rows.Next() {
		var s string
		testfix.Must(t, rows.Scan(&s))
		want = append(want, s)
	}
	rows.Close()
	if len(want) != 8 { // retried + fresh + 6
		t.Fatalf("fixture: %d pending", len(want))
	}
	linkRE := regexp.MustCompile(`class="event-link" href="/console/event\?id=([0-9a-f-]{36})"`)
	nextRE := regexp.MustCompile(`href="([^"]+)" id="next-page"`)
	var got []string
	u := srv.URL + "/console/deliveries?destination=" + kernelfix.DestMetering + "&state=pending&limit=3"
	pages := 0
	for u != "" {
		code, page := readmodelfix.ConsoleGet(t, nil, u)
		if code != 200 {
			t.Fatalf("GET %s = %d:\n%s", u, code, page)
		}
		pages++
		for _, m := range linkRE.FindAllStringSubmatch(page, -1) {
			got = append(got, m[1])
		}
		u = ""
		if m := nextRE.FindStringSubmatch(page); m != nil {
			u = srv.URL + html.UnescapeString(m[1])
			if !strings.Contains(u, "after=") || strings.Contains(u, "offset") {
				t.Fatalf("next link %s is not a keyset cursor", u)
			}
		}
		if pages == 1 && readmodelfix.ConsoleElem(t, page, "state-counts") != "pending: 8 · leased: 1 · quarantined: 1 · acknowledged: 1" {
			t.Errorf("counts %q", readmodelfix.ConsoleElem(t, page, "state-counts"))
		}
	}
	if pages != 3 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("paged %d pages:\n got %v\nwant %v", pages, got, want)
	}
	for state, id := range map[string]string{"leased": b.leased, "quarantined": b.quarantined, "acknowledged": b.acked} {
		_, page := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/deliveries?destination="+kernelfix.DestMetering+"&state="+state)
		ms := linkRE.FindAllStringSubmatch(page, -1)
		if len(ms) != 1 || ms[0][1] != id {
			t.Errorf("%s list: %v, want [%s]", state, ms, id)
		}
	}
	if code, _ := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/deliveries?destination="+kernelfix.DestMetering+"&state=done"); code != 400 {
		t.Errorf("unknown state = %d, want 400", code)
	}
	if code, _ := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/deliveries?destination="+kernelfix.DestMetering+"&state=pending&after=junk"); code != 400 {
		t.Errorf("bad cursor = %d, want 400", code)
	}
	// The overview links every count to its list.
	_, page := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console")
	if got := readmodelfix.ConsoleElem(t, page, "count-"+kernelfix.DestMetering+"-pending"); got != "8" {
		t.Errorf("overview pending = %q", got)
	}
	// SQL: bounded counts and argument checks.
	cs, err := pgcall.ConsoleDeliveryCounts(ctx, b.aud, kernelfix.DestMetering, 5)
	testfix.Must(t, err)
	if cs[0].Status != "pending" || cs[0].Deliveries != 5 || !cs[0].Capped || cs[1].Capped {
		t.Errorf("capped counts %+v", cs)
	}
	if _, err := b.aud.Exec(ctx, `SELECT * FROM outbox.console_deliveries($1, 'pending', now(), NULL, 10)`, kernelfix.DestMetering); pgcall.SQLState(err) != "22023" {
		t.Errorf("half a cursor: %v", err)
	}
	if _, err := pgcall.ConsoleDeliveries(ctx, b.aud, pgcall.ConsoleListParams{Destination: kernelfix.DestMetering, Status: "pending", Limit: 501}); pgcall.SQLState(err) != "22023" {
		t.Errorf("limit 501: %v", err)
	}
}

var (
	cnCSRFRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	cnKeyRE  = regexp.MustCompile(`name="idempotency_key" required maxlength="128" value="([^"]+)"`)
)

func cnPost(t *testing.T, c *http.Client, u string, form url.Values, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	testfix.Must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	testfix.Must(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func cnRecoveries(t *testing.T, db pgcall.DBTX, ev string) (n int, caseIDs string) {
	t.Helper()
	testfix.Must(t, db.QueryRow(context.Background(), `SELECT count(*), coalesce(string_agg(case_id, ','), '') FROM outbox.outbox_recoveries WHERE event_id = $1`, ev).Scan(&n, &caseIDs))
	return n, caseIDs
}

// Issue 25 item 3 (R-AK-10): the quarantine grouped by reason with each item's preview. The
// auditor's console has no form and refuses every POST (405); the operator's console refuses a
// POST without the CSRF cookie and token, with a bad token, or cross-site (403), and a good one
// re-delivers exactly once: the same form again (same idempotency key) returns the same audit
// row and changes nothing; the audit row is checked in SQL.
func TestConsoleQuarantineRedeliver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := cnSetup(t)
	aud := b.server(t, false, false)
	code, page := readmodelfix.ConsoleGet(t, nil, aud.URL+"/console/quarantine")
	if code != 200 {
		t.Fatalf("quarantine page = %d", code)
	}
	grp := regexp.MustCompile(`(?s)<h2 id="qg-0">(.*?)</h2>`).FindStringSubmatch(page)
	if grp == nil || readmodelfix.ConsoleText(grp[1]) != kernelfix.DestMetering+" - consumer_rejected: 1" {
		t.Fatalf("group heading %v:\n%s", grp, page)
	}
	if !strings.Contains(page, b.quarantined) || !strings.Contains(readmodelfix.ConsoleText(page), "quarantined -> pending") {
		t.Error("no item with its preview")
	}
	if strings.Contains(strings.ToLower(page), "method=\"post\"") || strings.Contains(page, `name="csrf"`) {
		t.Error("the auditor's console renders a write form")
	}
	form := url.Values{"destination": {kernelfix.DestMetering}, "event_id": {b.quarantined}, "case_id": {"CASE-25"},
		"reason": {"consumer fixed"}, "idempotency_key": {"cn-key-1"}}
	for _, p := range []string{"/console/redeliver", "/console/quarantine", "/status"} {
		if code, _ := cnPost(t, nil, aud.URL+p, form, nil); code != http.StatusMethodNotAllowed {
			t.Errorf("auditor POST %s = %d, want 405", p, code)
		}
	}
	if n, _ := cnRecoveries(t, b.Admin, b.quarantined); n != 0 {
		t.Fatalf("the auditor's console recovered %d", n)
	}

	op := b.server(t, true, false)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	_, page = readmodelfix.ConsoleGet(t, browser, op.URL+"/console/quarantine")
	tok, key := cnCSRFRE.FindStringSubmatch(page), cnKeyRE.FindStringSubmatch(page)
	if tok == nil || key == nil || !strings.Contains(page, `<label for="case-q0-0">Case id</label>`) {
		t.Fatalf("operator page has no labelled redeliver form with a token and a key:\n%s", page)
	}
	// Refused: no cookie and no token; cookie but no token; a wrong token; cross-site.
	if code, _ := cnPost(t, nil, op.URL+"/console/redeliver", form, nil); code != http.StatusForbidden {
		t.Errorf("POST without CSRF = %d, want 403", code)
	}
	if code, _ := cnPost(t, browser, op.URL+"/console/redeliver", form, nil); code != http.StatusForbidden {
		t.Errorf("POST without token = %d, want 403", code)
	}
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("csrf", strings.Repeat("0", 64))
	if code, _ := cnPost(t, browser, op.URL+"/console/redeliver", bad, nil); code != http.StatusForbidden {
		t.Errorf("POST with a bad token = %d, want 403", code)
	}
	good := url.Values{}
	for k, v := range form {
		good[k] = v
	}
	good.Set("csrf", tok[1])
	good.Set("idempotency_key", key[1])
	if code, _ := cnPost(t, browser, op.URL+"/console/redeliver", good, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("cross-site POST = %d, want 403", code)
	}
	if code, _ := cnPost(t, nil, op.URL+"/console/redeliver", good, nil); code != http.StatusForbidden {
		t.Errorf("POST with the token but without the cookie = %d, want 403", code)
	}
	if n, _ := cnRecoveries(t, b.Admin, b.quarantined); n != 0 {
		t.Fatalf("a refused POST recovered %d", n)
	}
	// The good one, twice (a double submit): one recovery, the same audit row both times.
	code, page = cnPost(t, browser, op.URL+"/console/redeliver", good, map[string]string{"Origin": op.URL})
	if code != 200 || readmodelfix.ConsoleElem(t, page, "new-status") != "pending" {
		t.Fatalf("redeliver = %d:\n%s", code, page)
	}
	rid := readmodelfix.ConsoleElem(t, page, "recovery-id")
	code, page = cnPost(t, browser, op.URL+"/console/redeliver", good, nil)
	if code != 200 || readmodelfix.ConsoleElem(t, page, "recovery-id") != rid {
		t.Fatalf("replay = %d, recovery %q, want %s", code, readmodelfix.ConsoleElem(t, page, "recovery-id"), rid)
	}
	n, cases := cnRecoveries(t, b.Admin, b.quarantined)
	var status, who string
	testfix.Must(t, b.Admin.QueryRow(ctx, `SELECT d.status, r.requested_by FROM outbox.outbox_deliveries d
		JOIN outbox.outbox_recoveries r ON r.destination = d.destination AND r.event_id = d.event_id
		WHERE d.destination = $1 AND d.event_id = $2 AND r.recovery_id = $3`, kernelfix.DestMetering, b.quarantined, rid).Scan(&status, &who))
	if n != 1 || cases != "CASE-25" || status != "pending" || who == "" {
		t.Errorf("after two submits: %d recoveries (%s), status %s, by %q", n, cases, status, who)
	}
	// The same key for another request is refused (OB601), a delivery not quarantined too (OB602).
	other := url.Values{}
	for k, v := range good {
		other[k] = v
	}
	other.Set("event_id", b.acked)
	if code, page := cnPost(t, browser, op.URL+"/console/redeliver", other, nil); code != http.StatusConflict || !strings.Contains(page, "OB601") {
		t.Errorf("key reuse = %d", code)
	}
	other.Set("idempotency_key", "cn-key-2")
	if code, page := cnPost(t, browser, op.URL+"/console/redeliver", other, nil); code != http.StatusConflict || !strings.Contains(page, "OB602") {
		t.Errorf("not quarantined = %d", code)
	}
	if n, _ := cnRecoveries(t, b.Admin, b.acked); n != 0 {
		t.Errorf("acknowledged delivery recovered")
	}
	// The quarantine page is empty now; the event page shows the delivery pending again.
	_, page = readmodelfix.ConsoleGet(t, browser, op.URL+"/console/quarantine")
	if !strings.Contains(page, `id="no-quarantine"`) {
		t.Error("the recovered delivery is still listed")
	}
	// A session that can do more than recover is refused as the operator session.
	if err := readmodel.CheckOperatorOnly(ctx, b.Admin); err == nil {
		t.Error("a superuser session was accepted as the operator session")
	}
	if err := readmodel.CheckOperatorOnly(ctx, b.aud); err == nil {
		t.Error("an auditor session was accepted as the operator session")
	}
}

// Issue 25 item 4: the activity of the last hour per destination from the database (finished
// attempts, acks, retries, quarantines, the largest ack lag), as a fragment the page re-fetches
// without a reload, with a visible as-of time; the overview includes it and the vendored script.
func TestConsoleActivity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := cnSetup(t)
	srv := b.server(t, false, false)
	code, frag := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console/activity")
	if code != 200 {
		t.Fatalf("activity = %d", code)
	}
	for id, want := range map[string]string{"finished-" + kernelfix.DestMetering: "3", "acks-" + kernelfix.DestMetering: "1",
		"retries-" + kernelfix.DestMetering: "1", "quarantines-" + kernelfix.DestMetering: "1", "acks-" + kernelfix.DestCoreOps: "0"} {
		if got := readmodelfix.ConsoleElem(t, frag, id); got != want {
			t.Errorf("%s = %q, want %s", id, got, want)
		}
	}
	asOf := regexp.MustCompile(`id="activity-as-of" datetime="([^"]+)"`).FindStringSubmatch(frag)
	if asOf == nil {
		t.Fatal("no as-of time")
	}
	if ts, err := time.Parse(time.RFC3339, asOf[1]); err != nil || time.Since(ts) > time.Hour {
		t.Errorf("as-of %q: %v", asOf[1], err)
	}
	if !strings.Contains(frag, `role="img" aria-label="acknowledgements per minute over the last hour: total 1, peak 1"`) {
		t.Error("chart without a text alternative")
	}
	_, page := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console")
	if !strings.Contains(page, `<script src="/console/console.js" defer></script>`) || !strings.Contains(page, `id="activity-as-of"`) {
		t.Error("overview lacks the script or the activity")
	}
	resp, err := http.Get(srv.URL + "/console/console.js")
	testfix.Must(t, err)
	js, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(js), `fetch("/console/live"`) || strings.Contains(string(js), "http") && strings.Contains(string(js), "://") {
		t.Errorf("console.js: %d, polls the fragment and loads nothing external", resp.StatusCode)
	}
	if csp := resp.Header.Get("Content-Type"); !strings.HasPrefix(csp, "text/javascript") {
		t.Errorf("console.js type %q", csp)
	}
	// SQL: the window and bucket are bounded.
	if _, err := pgcall.ConsoleActivityWindow(ctx, b.aud, 48*time.Hour, time.Minute); pgcall.SQLState(err) != "22023" {
		t.Errorf("48 h window: %v", err)
	}
}

// Issue 25 item 5 (R-MX-12): the overview shows every mailbox source with its pipeline status
// through the auditor-only mailbox.console_sources; with no source it says so; the
// function refuses a limit outside 1..1000 (22023) and is not the dispatcher's.
func TestConsoleMailboxPanel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := cnSetup(t)
	srv := b.server(t, false, false)
	code, page := readmodelfix.ConsoleGet(t, nil, srv.URL+"/console")
	if code != 200 {
		t.Fatalf("GET /console = %d:\n%s", code, page)
	}
	if got := readmodelfix.ConsoleElem(t, page, "mailbox-none"); got != "No mailbox source is registered." {
		t.Errorf("empty mailbox panel %q", got)
	}
	reg := testdb.Conn(t, b.Dsn, "outbox_registrar")
	if err := pgcall.RegisterMailboxSource(ctx, reg, pgcall.MailboxSourceParams{Source: "billing.mailbox",
		HoleReleaseAfter: time.Minute, BackfillDeadline: time.Hour, StartAfter: 41}); err != nil {
		t.Fatalf("register source: %v", err)
	}
	code, page = readmodelfix.ConsoleGet(t, nil, srv.URL+"/console")
	if code != 200 {
		t.Fatalf("GET /console = %d:\n%s", code, page)
	}
	row := readmodelfix.ConsoleElem(t, page, "mailbox-billing.mailbox")
	// the row's text: source, watermark 41 (start_after), nothing unfinished, no head
	if !strings.HasPrefix(row, "billing.mailbox410") || !strings.Contains(row, "none") {
		t.Errorf("mailbox row %q, want source billing.mailbox, watermark 41, 0 unfinished, no head", row)
	}
	if _, err := pgcall.ConsoleMailboxSources(ctx, b.aud, 0); pgcall.SQLState(err) != "22023" {
		t.Errorf("limit 0: %v, want 22023", err)
	}
	if _, err := pgcall.ConsoleMailboxSources(ctx, b.Disp, 10); pgcall.SQLState(err) != "42501" {
		t.Errorf("dispatcher call: %v, want 42501", err)
	}
}
