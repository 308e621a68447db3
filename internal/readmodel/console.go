package readmodel

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// The operator console (issue 25): delivery detail by event id, keyset-paged delivery lists per
// destination and state, the quarantine grouped by reason with the impact preview and - only
// when the server holds an outbox_operator session - the redeliver action, and activity charts
// that refresh without a full reload. Every read runs on the auditor session (Server.DB); only
// the redeliver POST uses Server.Operator.

// ConsoleStates are the delivery states the lists filter by.
var ConsoleStates = []string{"pending", "leased", "quarantined", "acknowledged"}

const (
	// DefaultLiveInterval is how often the overview re-fetches its live part (Server.LiveInterval).
	DefaultLiveInterval = 5 * time.Second
	// SearchPage is the search's page size.
	SearchPage = 50
	// CountCap bounds each per-state count of the console (outbox.console_delivery_counts).
	CountCap = 10000
	// PageSize is the default page of the delivery lists (at most 500).
	PageSize = 50
	// QuarantineGroupItems is how many items of each (destination, reason) group the quarantine
	// page shows (newest first); the rest are in the keyset-paged quarantined list.
	QuarantineGroupItems = 20
	// MailboxSourcesShown bounds the mailbox panel (sources by name).
	MailboxSourcesShown = 100
	// ActivityWindow and ActivityBucket shape the charts.
	ActivityWindow = time.Hour
	ActivityBucket = time.Minute
	csrfCookie     = "pgoutbox_console_csrf"
)

//go:embed console.js
var consoleJS []byte

// consoleCSS is the console's one stylesheet (light and dark theme), served by the process.
//
//go:embed console.css
var consoleCSS []byte

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

const consoleCSP = "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// consoleView is what every console page shares.
type consoleView struct {
	Title    string
	AsOf     time.Time
	Operator bool   // the server may redeliver (holds an outbox_operator session)
	CSRF     string // the form token (operator only)
	Payloads bool   // the server was started with payloads allowed
	Nav      string // the navigation entry of this page
	Kinds    []string
}

func (s *Server) console(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/console", "/console/":
		s.consoleOverview(ctx, w, r)
	case "/console/event":
		s.consoleEvent(ctx, w, r)
	case "/console/deliveries":
		s.consoleList(ctx, w, r)
	case "/console/quarantine":
		s.consoleQuarantine(ctx, w, r)
	case "/console/activity":
		s.consoleActivity(ctx, w, r)
	case "/console/live":
		s.consoleLive(ctx, w, r)
	case "/console/search":
		s.consoleSearch(ctx, w, r)
	case "/console/redeliver":
		s.consoleRedeliver(ctx, w, r)
	case "/console/pause", "/console/resume":
		s.consoleClaims(ctx, w, r)
	case "/console/console.js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(consoleJS)
	case "/console/console.css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(consoleCSS)
	default:
		http.NotFound(w, r)
	}
}

// base fills the shared part of a view; for an operator server it makes sure the browser holds
// a CSRF cookie and derives the form token from it.
func (s *Server) base(w http.ResponseWriter, r *http.Request, title string) consoleView {
	v := consoleView{Title: title, AsOf: time.Now().UTC(), Operator: s.Operator != nil, Payloads: s.ShowPayloads,
		Kinds: pgcall.ConsoleSearchKinds}
	switch r.URL.Path {
	case "/console", "/console/":
		v.Nav = "overview"
	case "/console/search":
		v.Nav = "search"
	case "/console/deliveries":
		v.Nav = "deliveries"
	case "/console/quarantine":
		v.Nav = "quarantine"
	case "/console/event":
		v.Nav = "event"
	}
	if s.Operator != nil {
		nonce := ""
		if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
			if _, err := hex.DecodeString(c.Value); err == nil {
				nonce = c.Value
			}
		}
		if nonce == "" {
			var b [32]byte
			_, _ = rand.Read(b[:])
			nonce = hex.EncodeToString(b[:])
			http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: nonce, Path: "/console", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		}
		v.CSRF = s.csrfToken(nonce)
	}
	return v
}

func (s *Server) csrfToken(nonce string) string {
	s.keyOnce.Do(func() {
		if len(s.CSRFKey) == 0 {
			s.CSRFKey = make([]byte, 32)
			_, _ = rand.Read(s.CSRFKey)
		}
	})
	m := hmac.New(sha256.New, s.CSRFKey)
	m.Write([]byte("pgoutbox-console-form\x00" + nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// checkCSRF accepts a POST only with the cookie and the matching form token, and refuses a
// cross-site request outright (Sec-Fetch-Site / Origin).
func (s *Server) checkCSRF(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) != 64 {
		return false
	}
	want := s.csrfToken(c.Value)
	return hmac.Equal([]byte(want), []byte(r.PostFormValue("csrf")))
}

func (s *Server) render(w http.ResponseWriter, status int, name string, v any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", consoleCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	if err := consoleTemplates.ExecuteTemplate(w, name, v); err != nil && s.Logger != nil {
		s.Logger.Error("render console page", "page", name, "err", err)
	}
}

func (s *Server) problem(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, status, "problem", struct {
		consoleView
		Message string
	}{s.base(w, r, "problem"), msg})
}

// ---- overview (live) ----

type liveDest struct {
	pgcall.ConsoleDestination
	Counts         []pgcall.ConsoleCount
	Acks, Failures int64 // last hour
}

// liveView is the overview's live part: the page renders it once, console.js re-fetches it from
// /console/live every IntervalSeconds.
type liveView struct {
	consoleView
	IntervalSeconds int
	Backlog         int64
	BacklogCapped   bool // a destination's pending or leased count passed CountCap
	Oldest          time.Duration
	Acks, Failures  int64
	Quarantined     int64
	Gaps            int64
	Paused          int
	Dests           []liveDest
	Activity        activityView
	Projections     []pgcall.ProjectionVersionRow
	Progress        map[string]pgcall.CandidateProgress
	Intake          []IntakeHealth
	Mailbox         []pgcall.ConsoleMailboxSource
}

func (s *Server) loadLive(ctx context.Context, v consoleView) (liveView, error) {
	lv := liveView{consoleView: v, IntervalSeconds: int(s.liveInterval() / time.Second)}
	dests, err := pgcall.ConsoleDestinations(ctx, s.DB, CountCap)
	if err != nil {
		return lv, err
	}
	stats := make([]pgcall.DestinationStats, 0, len(dests))
	for _, d := range dests {
		st := pgcall.DestinationStats{Destination: d.Destination, ConsumerName: d.ConsumerName, Pending: d.Pending, Leased: d.Leased}
		if d.OldestPendingAt != nil {
			st.OldestPendingAge = lv.AsOf.Sub(*d.OldestPendingAt)
		}
		stats = append(stats, st)
	}
	if lv.Activity, err = s.loadActivity(ctx, stats); err != nil {
		return lv, err
	}
	for i, d := range dests {
		c, err := pgcall.ConsoleDeliveryCounts(ctx, s.DB, d.Destination, CountCap)
		if err != nil {
			return lv, err
		}
		a := lv.Activity.Series[i]
		lv.Dests = append(lv.Dests, liveDest{ConsoleDestination: d, Counts: c, Acks: a.TotalAcks, Failures: a.Failed})
		lv.Backlog += min(d.Pending, CountCap) + min(d.Leased, CountCap)
		lv.BacklogCapped = lv.BacklogCapped || d.Pending > CountCap || d.Leased > CountCap
		lv.Quarantined += min(d.QuarantinedOpen, CountCap)
		lv.Gaps += min(d.OpenGaps, CountCap)
		lv.Acks += a.TotalAcks
		lv.Failures += a.Failed
		if d.PausedReason != nil {
			lv.Paused++
		}
		if d.OldestPendingAt != nil && lv.AsOf.Sub(*d.OldestPendingAt) > lv.Oldest {
			lv.Oldest = lv.AsOf.Sub(*d.OldestPendingAt)
		}
	}
	if lv.Projections, err = pgcall.ConsoleProjectionVersions(ctx, s.DB, MaxProjectionVersions); err != nil {
		return lv, err
	}
	if lv.Progress, err = LoadProgress(ctx, s.DB, lv.Projections); err != nil {
		return lv, err
	}
	if lv.Intake, err = LoadIntake(ctx, s.DB, lv.AsOf); err != nil {
		return lv, err
	}
	if lv.Mailbox, err = pgcall.ConsoleMailboxSources(ctx, s.DB, MailboxSourcesShown); err != nil {
		return lv, err
	}
	return lv, nil
}

func (s *Server) liveInterval() time.Duration {
	if s.LiveInterval >= time.Second {
		return s.LiveInterval
	}
	return DefaultLiveInterval
}

func (s *Server) consoleOverview(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	base := s.base(w, r, "overview")
	lv, err := s.loadLive(ctx, base)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "overview", struct {
		consoleView
		Live liveView
	}{base, lv})
}

// consoleLive is the fragment the overview re-fetches (the same template the page renders).
func (s *Server) consoleLive(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	lv, err := s.loadLive(ctx, s.base(w, r, "overview"))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "live", lv)
}

// ---- event detail ----

type deliveryView struct {
	pgcall.ConsoleDelivery
	Attempts []pgcall.ConsoleAttempt
	Preview  *pgcall.RedeliveryPreview // quarantined only
	Key      string                    // fresh idempotency key for the form
}

func (s *Server) consoleEvent(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	v := struct {
		consoleView
		ID          string
		Event       *pgcall.ConsoleEvent
		NotFound    bool
		Deliveries  []deliveryView
		Payload     string
		ShowPayload bool
	}{consoleView: s.base(w, r, "event"), ID: id}
	if id == "" {
		s.render(w, http.StatusOK, "event", v)
		return
	}
	if !uuidRE.MatchString(id) {
		s.problem(w, r, http.StatusBadRequest, "an event id is a UUID")
		return
	}
	v.Title = "event " + id
	ev, err := pgcall.ConsoleEventByID(ctx, s.DB, id)
	switch {
	case errors.Is(err, pgcall.ErrEventNotFound):
		v.NotFound = true
		s.render(w, http.StatusNotFound, "event", v)
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	v.Event = &ev
	ds, err := pgcall.ConsoleEventDeliveries(ctx, s.DB, id)
	if err != nil {
		s.fail(w, err)
		return
	}
	as, err := pgcall.ConsoleEventAttempts(ctx, s.DB, id)
	if err != nil {
		s.fail(w, err)
		return
	}
	for _, d := range ds {
		dv := deliveryView{ConsoleDelivery: d}
		for _, a := range as {
			if a.Destination == d.Destination {
				dv.Attempts = append(dv.Attempts, a)
			}
		}
		if d.Status == "quarantined" {
			p, err := pgcall.PreviewRedelivery(ctx, s.DB, d.Destination, id)
			if err != nil {
				s.fail(w, err)
				return
			}
			dv.Preview, dv.Key = &p, newKey()
		}
		v.Deliveries = append(v.Deliveries, dv)
	}
	if s.ShowPayloads && r.URL.Query().Get("payload") == "show" {
		p, err := pgcall.ConsoleEventPayload(ctx, s.DB, id)
		if err != nil {
			s.fail(w, err)
			return
		}
		var out strings.Builder
		if b, err := json.MarshalIndent(json.RawMessage(p), "", "  "); err == nil {
			out.Write(b)
		} else {
			out.Write(p)
		}
		v.Payload, v.ShowPayload = out.String(), true
	}
	s.render(w, http.StatusOK, "event", v)
}

func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "console-" + hex.EncodeToString(b[:])
}

// ---- lists ----

func encodeCursor(c pgcall.ConsoleCursor) string {
	return c.CreatedAt.UTC().Format(time.RFC3339Nano) + "_" + c.EventID
}

func decodeCursor(s string) (pgcall.ConsoleCursor, error) {
	t, id, ok := strings.Cut(s, "_")
	if !ok || !uuidRE.MatchString(id) {
		return pgcall.ConsoleCursor{}, errors.New("bad cursor")
	}
	ts, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return pgcall.ConsoleCursor{}, errors.New("bad cursor")
	}
	return pgcall.ConsoleCursor{CreatedAt: ts, EventID: id}, nil
}

func (s *Server) consoleList(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	stats, err := pgcall.DeliveryStats(ctx, s.DB)
	if err != nil {
		s.fail(w, err)
		return
	}
	v := struct {
		consoleView
		Destinations []string
		States       []string
		Destination  string
		State        string
		Counts       []pgcall.ConsoleCount
		Items        []pgcall.ConsoleListItem
		After        string
		Next         string
		Limit        int
	}{consoleView: s.base(w, r, "deliveries"), States: ConsoleStates, Destination: q.Get("destination"),
		State: q.Get("state"), Limit: PageSize}
	known := false
	for _, st := range stats {
		v.Destinations = append(v.Destinations, st.Destination)
		known = known || st.Destination == v.Destination
	}
	if v.State == "" {
		v.State = "pending"
	}
	if v.Destination == "" {
		s.render(w, http.StatusOK, "list", v)
		return
	}
	okState := false
	for _, st := range ConsoleStates {
		okState = okState || st == v.State
	}
	if !known || !okState {
		s.problem(w, r, http.StatusBadRequest, "unknown destination or state")
		return
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			s.problem(w, r, http.StatusBadRequest, "limit must be 1..500")
			return
		}
		v.Limit = n
	}
	var after pgcall.ConsoleCursor
	if a := q.Get("after"); a != "" {
		if after, err = decodeCursor(a); err != nil {
			s.problem(w, r, http.StatusBadRequest, "bad page cursor")
			return
		}
		v.After = a
	}
	v.Title = v.State + " deliveries of " + v.Destination
	if v.Counts, err = pgcall.ConsoleDeliveryCounts(ctx, s.DB, v.Destination, CountCap); err != nil {
		s.fail(w, err)
		return
	}
	items, err := pgcall.ConsoleDeliveries(ctx, s.DB, pgcall.ConsoleListParams{Destination: v.Destination,
		Status: v.State, After: after, Limit: v.Limit + 1})
	if err != nil {
		s.fail(w, err)
		return
	}
	if len(items) > v.Limit {
		items = items[:v.Limit]
		last := items[len(items)-1]
		v.Next = encodeCursor(pgcall.ConsoleCursor{CreatedAt: last.CreatedAt, EventID: last.EventID})
	}
	v.Items = items
	s.render(w, http.StatusOK, "list", v)
}

// ---- quarantine ----

type quarantineItem struct {
	pgcall.OpenQuarantine
	Preview pgcall.RedeliveryPreview
	Key     string
}

type quarantineGroup struct {
	Destination, Reason string
	Count               int64
	Items               []quarantineItem
}

func (s *Server) consoleQuarantine(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	reasons, err := pgcall.QuarantineReasons(ctx, s.DB)
	if err != nil {
		s.fail(w, err)
		return
	}
	v := struct {
		consoleView
		Destination, Reason string
		Destinations        []string
		Reasons             []string
		Groups              []quarantineGroup
		PerGroup            int
	}{consoleView: s.base(w, r, "quarantine"), Destination: q.Get("destination"), Reason: q.Get("reason"),
		PerGroup: QuarantineGroupItems}
	seenD, seenR := map[string]bool{}, map[string]bool{}
	for _, g := range reasons {
		if !seenD[g.Destination] {
			seenD[g.Destination] = true
			v.Destinations = append(v.Destinations, g.Destination)
		}
		if !seenR[g.Reason] {
			seenR[g.Reason] = true
			v.Reasons = append(v.Reasons, g.Reason)
		}
		if (v.Destination != "" && g.Destination != v.Destination) || (v.Reason != "" && g.Reason != v.Reason) {
			continue
		}
		d, reason := g.Destination, g.Reason
		items, err := pgcall.OpenQuarantines(ctx, s.DB, &d, &reason, QuarantineGroupItems)
		if err != nil {
			s.fail(w, err)
			return
		}
		grp := quarantineGroup{Destination: d, Reason: reason, Count: g.Count}
		for _, it := range items {
			p, err := pgcall.PreviewRedelivery(ctx, s.DB, it.Destination, it.EventID)
			if err != nil {
				s.fail(w, err)
				return
			}
			grp.Items = append(grp.Items, quarantineItem{OpenQuarantine: it, Preview: p, Key: newKey()})
		}
		v.Groups = append(v.Groups, grp)
	}
	s.render(w, http.StatusOK, "quarantine", v)
}

// ---- search ----

// searchTimeLayout is the value of an <input type="datetime-local" step="1"> (read as UTC).
const searchTimeLayout = "2006-01-02T15:04:05"

func parseSearchTime(v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	for _, layout := range []string{searchTimeLayout, "2006-01-02T15:04", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return &t, nil
		}
	}
	return nil, errors.New("bad time")
}

func (s *Server) consoleSearch(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := struct {
		consoleView
		Kind, Value, From, To, Before string
		Searched, DeliveryKind        bool
		Error                         string
		Hits                          []pgcall.ConsoleSearchHit
		Next                          string
	}{consoleView: s.base(w, r, "search"), Kind: q.Get("kind"), Value: strings.TrimSpace(q.Get("q")), From: q.Get("from"),
		To: q.Get("to"), Before: q.Get("before")}
	if v.Kind == "" {
		v.Kind = "eventId"
		s.render(w, http.StatusOK, "search", v)
		return
	}
	v.Searched = true
	v.DeliveryKind = v.Kind == "destination" || v.Kind == "errorCode"
	p := pgcall.ConsoleSearchParams{Kind: v.Kind, Value: v.Value, Limit: SearchPage + 1}
	var err error
	if p.From, err = parseSearchTime(v.From); err == nil {
		p.To, err = parseSearchTime(v.To)
	}
	if err == nil && v.Before != "" {
		c, cerr := decodeCursor(v.Before)
		p.BeforeAt, p.BeforeID, err = c.CreatedAt, c.EventID, cerr
	}
	if err != nil {
		v.Searched, v.Error = false, "invalid search: a time is YYYY-MM-DDTHH:MM:SS (UTC) and the page cursor must come from a next-page link"
		s.render(w, http.StatusBadRequest, "search", v)
		return
	}
	hits, err := pgcall.ConsoleSearch(ctx, s.DB, p)
	switch {
	case pgcall.SQLState(err) == "22023":
		v.Searched, v.Error = false, "invalid search: "+sqlMessage(err)
		s.render(w, http.StatusBadRequest, "search", v)
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	if len(hits) > SearchPage {
		hits = hits[:SearchPage]
		last := hits[len(hits)-1]
		nq := url.Values{"kind": {v.Kind}, "q": {v.Value}, "from": {v.From}, "to": {v.To},
			"before": {encodeCursor(pgcall.ConsoleCursor{CreatedAt: last.At, EventID: last.CursorID})}}
		v.Next = "/console/search?" + nq.Encode()
	}
	v.Hits = hits
	s.render(w, http.StatusOK, "search", v)
}

// ---- pause / resume a destination's claims (POST, operator only) ----

func (s *Server) consoleClaims(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	if !s.acceptForm(w, r) {
		return
	}
	action := strings.TrimPrefix(r.URL.Path, "/console/")
	dest, reason := r.PostFormValue("destination"), strings.TrimSpace(r.PostFormValue("reason"))
	if dest == "" || (action == "pause" && reason == "") {
		s.problem(w, r, http.StatusBadRequest, "a destination and, to pause, a reason are required")
		return
	}
	var err error
	if action == "pause" {
		err = pgcall.PauseDestinationClaims(ctx, s.Operator, dest, reason)
	} else {
		reason = ""
		err = pgcall.ResumeDestinationClaims(ctx, s.Operator, dest)
	}
	switch {
	case pgcall.SQLState(err) == "22023":
		s.problem(w, r, http.StatusBadRequest, "refused: "+sqlMessage(err))
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	if s.Logger != nil {
		s.Logger.Info("console claims "+action, "destination", dest)
	}
	s.render(w, http.StatusOK, "claims", struct {
		consoleView
		Action, Destination, Reason string
	}{s.base(w, r, action+"d claims"), action, dest, reason})
}

// acceptForm admits an operator POST: method, size, form and CSRF token; it answers the refusal
// itself and reports false.
func (s *Server) acceptForm(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || s.Operator == nil {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.problem(w, r, http.StatusBadRequest, "unreadable form")
		return false
	}
	if !s.checkCSRF(r) {
		if s.Logger != nil {
			s.Logger.Warn("console form refused: missing or bad CSRF token", "path", r.URL.Path)
		}
		s.problem(w, r, http.StatusForbidden, "refused: the form token is missing or does not match (reload the page and try again)")
		return false
	}
	return true
}

// ---- redeliver (POST, operator only) ----

func (s *Server) consoleRedeliver(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	if !s.acceptForm(w, r) {
		return
	}
	p := pgcall.RedeliverParams{Destination: r.PostFormValue("destination"), EventID: r.PostFormValue("event_id"),
		CaseID: strings.TrimSpace(r.PostFormValue("case_id")), Reason: strings.TrimSpace(r.PostFormValue("reason")),
		IdempotencyKey: strings.TrimSpace(r.PostFormValue("idempotency_key"))}
	if p.Destination == "" || !uuidRE.MatchString(p.EventID) || p.CaseID == "" || p.Reason == "" || p.IdempotencyKey == "" {
		s.problem(w, r, http.StatusBadRequest, "destination, event id, case id, reason and idempotency key are all required")
		return
	}
	res, err := pgcall.RedeliverQuarantined(ctx, s.Operator, p)
	switch {
	case errors.Is(err, pgcall.ErrRecoveryKeyConflict):
		s.problem(w, r, http.StatusConflict, "refused (OB601): this idempotency key was already used for a different request")
		return
	case errors.Is(err, pgcall.ErrNotQuarantined):
		s.problem(w, r, http.StatusConflict, "refused (OB602): the delivery is not quarantined (nothing was changed)")
		return
	case pgcall.SQLState(err) == "22023":
		s.problem(w, r, http.StatusBadRequest, "refused: "+sqlMessage(err))
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	if s.Logger != nil {
		s.Logger.Info("console redeliver", "destination", p.Destination, "event_id", p.EventID, "case_id", p.CaseID,
			"recovery_id", res.RecoveryID)
	}
	s.render(w, http.StatusOK, "redelivered", struct {
		consoleView
		pgcall.RedeliverParams
		pgcall.Redelivery
	}{s.base(w, r, "re-delivered"), p, res})
}

// ---- activity ----

type activitySeries struct {
	Destination                                       string
	Finished, Acknowledged, Retried, Quarantined      []int64
	Failures                                          []int64   // retries + quarantines per bucket
	Failed                                            int64     // their total
	Lag                                               []float64 // max ack lag per bucket, seconds
	TotalFinished, TotalAcks, TotalRetries, TotalQuar int64
	MaxLag                                            float64
	OldestPendingAge                                  time.Duration
	Pending, Leased                                   int64
}

type activityView struct {
	AsOf    time.Time
	From    time.Time
	Buckets int
	Series  []activitySeries
}

func (s *Server) loadActivity(ctx context.Context, stats []pgcall.DestinationStats) (activityView, error) {
	rows, err := pgcall.ConsoleActivityWindow(ctx, s.DB, ActivityWindow, ActivityBucket)
	if err != nil {
		return activityView{}, err
	}
	n := int(ActivityWindow / ActivityBucket)
	now := time.Now().UTC()
	from := now.Truncate(ActivityBucket).Add(-time.Duration(n-1) * ActivityBucket)
	v := activityView{AsOf: now, From: from, Buckets: n}
	idx := map[string]int{}
	for _, st := range stats {
		idx[st.Destination] = len(v.Series)
		v.Series = append(v.Series, activitySeries{Destination: st.Destination, Finished: make([]int64, n),
			Acknowledged: make([]int64, n), Retried: make([]int64, n), Quarantined: make([]int64, n),
			Failures: make([]int64, n), Lag: make([]float64, n), OldestPendingAge: st.OldestPendingAge, Pending: st.Pending, Leased: st.Leased})
	}
	for _, a := range rows {
		i, ok := idx[a.Destination]
		if !ok {
			continue
		}
		b := int(a.BucketStart.Sub(from) / ActivityBucket)
		if b < 0 || b >= n {
			continue // the window's first, partial bucket
		}
		sr := &v.Series[i]
		sr.Finished[b] += a.Finished
		sr.Acknowledged[b] += a.Acknowledged
		sr.Retried[b] += a.Retried
		sr.Quarantined[b] += a.Quarantined
		sr.Failures[b] += a.Retried + a.Quarantined
		sr.Failed += a.Retried + a.Quarantined
		sr.TotalFinished += a.Finished
		sr.TotalAcks += a.Acknowledged
		sr.TotalRetries += a.Retried
		sr.TotalQuar += a.Quarantined
		if a.MaxAckLagSeconds != nil && *a.MaxAckLagSeconds > sr.Lag[b] {
			sr.Lag[b] = *a.MaxAckLagSeconds
			if sr.Lag[b] > sr.MaxLag {
				sr.MaxLag = sr.Lag[b]
			}
		}
	}
	return v, nil
}

func (s *Server) consoleActivity(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	stats, err := pgcall.DeliveryStats(ctx, s.DB)
	if err != nil {
		s.fail(w, err)
		return
	}
	a, err := s.loadActivity(ctx, stats)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "activity", a)
}

// ---- template helpers ----

func fmtTime(t any) string {
	switch x := t.(type) {
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.000Z")
	case *time.Time:
		if x == nil {
			return "-"
		}
		return x.UTC().Format("2006-01-02 15:04:05.000Z")
	}
	return fmt.Sprint(t)
}

func deref(p any) string {
	switch x := p.(type) {
	case *string:
		if x == nil {
			return "-"
		}
		return *x
	case *int:
		if x == nil {
			return "-"
		}
		return strconv.Itoa(*x)
	}
	return fmt.Sprint(p)
}

func countText(c pgcall.ConsoleCount) string {
	if c.Capped {
		return strconv.FormatInt(c.Deliveries, 10) + "+"
	}
	return strconv.FormatInt(c.Deliveries, 10)
}
