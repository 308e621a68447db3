package readmodel

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// SearchKinds are the exact-id kinds of R-OP-3, in the order the search box offers them.
var SearchKinds = []string{"eventId", "operationId", "correlationId", "runId", "reservationId", "causationId", "observationId"}

// Gauges are the read-model gauges (R-DP-4 style, low cardinality: at most MaxScopes scope
// label values, the canonical source filter of each scope's latest proof).
type Gauges struct {
	Registry      *prometheus.Registry
	AntiJoin      *prometheus.GaugeVec
	ProofAge      *prometheus.GaugeVec
	ProofCurrent  *prometheus.GaugeVec
	ProofComplete *prometheus.GaugeVec
	// the intake per registered workload over the last IntakeHorizon (R-OB-5; at most
	// MaxWorkloads label values)
	IntakeAccepted     *prometheus.GaugeVec
	IntakeRejections   *prometheus.GaugeVec
	IntakeSendFailures *prometheus.GaugeVec
	IntakeDegraded     *prometheus.GaugeVec
	// projection versions (R-PV-5; at most MaxProjectionVersions series)
	ProjectionVersion      *prometheus.GaugeVec
	ProjectionBuildSources *prometheus.GaugeVec
	ProjectionBuildLeft    *prometheus.GaugeVec
	ProjectionBuildLag     *prometheus.GaugeVec
}

// NewGauges registers the gauges in a registry of their own.
func NewGauges() *Gauges {
	g := &Gauges{
		Registry: prometheus.NewRegistry(),
		AntiJoin: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "readmodel", Name: "receipt_antijoin_events",
			Help: "Receipt anti-join of the scope's latest completeness proof: in-scope deliveries to a projection target without an acknowledged, verified receipt (R-OP-2)."}, []string{"scope"}),
		ProofAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "readmodel", Name: "proof_age_seconds",
			Help: "Age of the scope's latest completeness proof."}, []string{"scope"}),
		ProofCurrent: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "readmodel", Name: "proof_verified_current",
			Help: "1 when the scope's latest proof re-checks as verified_current now, else 0 (stale or unverified)."}, []string{"scope"}),
		ProofComplete: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "readmodel", Name: "proof_complete",
			Help: "1 when the scope's latest proof is complete_for_supported_scope, else 0."}, []string{"scope"}),
	}
	intake := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "intake", Name: name, Help: help}, []string{"workload"})
	}
	g.IntakeAccepted = intake("accepted_last_hour", "Observations accepted (accepted_new) from the workload in the last hour (R-OB-5).")
	g.IntakeRejections = intake("rejections_last_hour", "Intake rejections and conflicts answered to the workload in the last hour, quota refusals included (R-OB-5, R-OB-6).")
	g.IntakeSendFailures = intake("send_failures_last_hour", "Observations the workload reported it could not send in the last hour (intake.record_send_failures).")
	g.IntakeDegraded = intake("degraded", "1 when any health window of the last hour is degraded (a failure or rejection), else 0; unknown windows (nothing heard) count as 0 here.")
	g.ProjectionVersion = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "projection", Name: "version_state",
		Help: "1 for each registered projection version in its state (active, shadow, frozen, retired) (R-PV-5)."}, []string{"projection", "version", "state"})
	g.ProjectionBuildSources = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "projection", Name: "build_sources",
		Help: "Sources handed to the version's most recent shadow build so far (R-PV-5)."}, []string{"projection", "version"})
	g.ProjectionBuildLeft = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "projection", Name: "build_remaining",
		Help: "Sources the version's latest build still has to apply (outbox.candidate_progress, R-PV-5)."}, []string{"projection", "version", "state"})
	g.ProjectionBuildLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pgoutbox", Subsystem: "projection", Name: "build_lag_seconds",
		Help: "Age of the oldest source the version's latest build has not applied (outbox.candidate_progress, R-PV-5)."}, []string{"projection", "version"})
	g.Registry.MustRegister(g.ProjectionBuildLeft, g.ProjectionBuildLag)
	g.Registry.MustRegister(g.AntiJoin, g.ProofAge, g.ProofCurrent, g.ProofComplete,
		g.IntakeAccepted, g.IntakeRejections, g.IntakeSendFailures, g.IntakeDegraded,
		g.ProjectionVersion, g.ProjectionBuildSources)
	return g
}

// SetProjections replaces the projection-version gauges (progress: LoadProgress's map).
func (g *Gauges) SetProjections(rows []pgcall.ProjectionVersionRow, progress map[string]pgcall.CandidateProgress) {
	for _, v := range []*prometheus.GaugeVec{g.ProjectionVersion, g.ProjectionBuildSources, g.ProjectionBuildLeft, g.ProjectionBuildLag} {
		v.Reset()
	}
	for _, r := range rows {
		v := fmt.Sprint(r.ProjectionVersion)
		g.ProjectionVersion.WithLabelValues(r.ProjectionName, v, r.State).Set(1)
		if r.SourcesBuilt != nil {
			g.ProjectionBuildSources.WithLabelValues(r.ProjectionName, v).Set(float64(*r.SourcesBuilt))
		}
		if r.BuildID != nil {
			if p, ok := progress[*r.BuildID]; ok {
				g.ProjectionBuildLeft.WithLabelValues(r.ProjectionName, v, p.State).Set(float64(p.Remaining))
				g.ProjectionBuildLag.WithLabelValues(r.ProjectionName, v).Set(p.LagSeconds)
			}
		}
	}
}

// SetIntake replaces the intake gauges (one series per workload).
func (g *Gauges) SetIntake(hs []IntakeHealth) {
	for _, v := range []*prometheus.GaugeVec{g.IntakeAccepted, g.IntakeRejections, g.IntakeSendFailures, g.IntakeDegraded} {
		v.Reset()
	}
	for _, h := range hs {
		g.IntakeAccepted.WithLabelValues(h.WorkloadPrincipalID).Set(float64(h.Accepted))
		g.IntakeRejections.WithLabelValues(h.WorkloadPrincipalID).Set(float64(h.IntakeRejections))
		g.IntakeSendFailures.WithLabelValues(h.WorkloadPrincipalID).Set(float64(h.SendFailures))
		d := 0.0
		if h.Worst == "degraded" {
			d = 1
		}
		g.IntakeDegraded.WithLabelValues(h.WorkloadPrincipalID).Set(d)
	}
}

// Set replaces the gauges with the given proofs (one series per scope).
func (g *Gauges) Set(proofs []pgcall.ProofSummary) {
	for _, v := range []*prometheus.GaugeVec{g.AntiJoin, g.ProofAge, g.ProofCurrent, g.ProofComplete} {
		v.Reset()
	}
	b := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	for _, p := range proofs {
		if p.ReceiptAntiJoin != nil {
			g.AntiJoin.WithLabelValues(p.SourceFilter).Set(float64(*p.ReceiptAntiJoin))
		}
		g.ProofAge.WithLabelValues(p.SourceFilter).Set(p.Age.Seconds())
		g.ProofCurrent.WithLabelValues(p.SourceFilter).Set(b(p.Freshness == "verified_current"))
		g.ProofComplete.WithLabelValues(p.SourceFilter).Set(b(p.Status == "complete_for_supported_scope"))
	}
}

// Server serves GET /status (the page and its search box), GET /metrics and the operator
// console under /console (console.go). DB must run as outbox_auditor (CheckAuditorOnly): every
// read goes through it. Every method but GET/HEAD is 405, with one exception: POST
// /console/redeliver when Operator is set (an outbox_operator session, CheckOperatorOnly) - the
// console's only write action, CSRF-protected. Without Operator no page has a form that writes
// and no POST is accepted anywhere.
type Server struct {
	DB           pgcall.DBTX
	Operator     pgcall.DBTX // nil: read-only console
	ShowPayloads bool        // the event page may show a payload on explicit request (outbox.console_event_payload)
	CSRFKey      []byte      // HMAC key of the console's form tokens; random per process when empty
	Gauges       *Gauges
	Logger       *slog.Logger
	Timeout      time.Duration // per request; 0 = 30 s
	LiveInterval time.Duration // how often the console overview re-fetches its live part; 0 = DefaultLiveInterval

	keyOnce sync.Once
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	write := r.Method == http.MethodPost && s.Operator != nil &&
		(r.URL.Path == "/console/redeliver" || r.URL.Path == "/console/pause" || r.URL.Path == "/console/resume")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !write {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: GET only", http.StatusMethodNotAllowed)
		return
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	switch r.URL.Path {
	case "/", "/status":
		s.page(ctx, w, r)
	case "/metrics":
		proofs, err := pgcall.LatestProofs(ctx, s.DB, MaxScopes) // the gauges need the proofs only
		if err != nil {
			s.fail(w, err)
			return
		}
		s.Gauges.Set(proofs)
		hs, err := LoadIntake(ctx, s.DB, time.Now())
		if err != nil {
			s.fail(w, err)
			return
		}
		s.Gauges.SetIntake(hs)
		pv, err := pgcall.ConsoleProjectionVersions(ctx, s.DB, MaxProjectionVersions)
		if err != nil {
			s.fail(w, err)
			return
		}
		prog, err := LoadProgress(ctx, s.DB, pv)
		if err != nil {
			s.fail(w, err)
			return
		}
		s.Gauges.SetProjections(pv, prog)
		promhttp.HandlerFor(s.Gauges.Registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	default:
		if r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, "/console/") {
			s.console(ctx, w, r)
			return
		}
		http.NotFound(w, r)
	}
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	if s.Logger != nil {
		s.Logger.Error("status page", "err", err)
	}
	http.Error(w, "status unavailable (see the server log)", http.StatusServiceUnavailable)
}

type searchView struct {
	Kind, ID string
	Error    string
	Hits     []pgcall.SearchHit
}

type pageView struct {
	Status
	Kinds  []string
	Search *searchView
}

func (s *Server) page(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	st, err := Load(ctx, s.DB)
	if err != nil {
		s.fail(w, err)
		return
	}
	if s.Gauges != nil {
		s.Gauges.Set(st.Proofs)
		s.Gauges.SetIntake(st.Intake)
		s.Gauges.SetProjections(st.Projections, st.Progress)
	}
	v := pageView{Status: st, Kinds: SearchKinds}
	q := r.URL.Query()
	if kind, id := q.Get("kind"), q.Get("id"); kind != "" || id != "" {
		sv := &searchView{Kind: kind, ID: id}
		hits, err := pgcall.SearchExactID(ctx, s.DB, kind, id)
		switch {
		case err == nil:
			sv.Hits = hits
		case pgcall.SQLState(err) == "22023":
			sv.Error = "invalid search: " + sqlMessage(err)
		default:
			s.fail(w, err)
			return
		}
		v.Search = sv
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	if err := pageTemplate.Execute(w, v); err != nil && s.Logger != nil {
		s.Logger.Error("render status page", "err", err)
	}
}

func sqlMessage(err error) string {
	var e *pgcall.Error
	if errors.As(err, &e) {
		return e.PgErr.Message
	}
	return err.Error()
}

var pageTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"age": func(d time.Duration) string {
		if d <= 0 {
			return "-"
		}
		return d.Round(time.Second).String()
	},
	"str": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"i64": func(p *int64) string {
		if p == nil {
			return "not evaluated"
		}
		return fmt.Sprint(*p)
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12] + "…"
		}
		return s
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pgoutbox status</title>
<style>
body{font-family:sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin-bottom:1.2em}
th,td{border:1px solid #bbb;padding:.3em .6em;text-align:left}
th{background:#eee} td.n{text-align:right}
.ok{color:#075} .bad{color:#a00}
</style></head><body>
<h1>pgoutbox status</h1>
<nav aria-label="console"><p><a href="/console" id="console-link">operator console</a> (delivery detail, lists, quarantine, activity)</p></nav>
<p>Read-only (auditor). Generated <span id="generated-at">{{.GeneratedAt.Format "2006-01-02T15:04:05Z"}}</span>. No payloads are shown.</p>
<h2>Active delivery set</h2>
{{with .Active}}<p id="active-set">version <span id="active-version">{{.DeliverySetVersion}}</span>, definition schema {{.DefinitionSchemaVersion}}, {{.DigestAlgorithmVersion}}, digest <code id="active-digest">{{.DefinitionDigest}}</code>{{if .SourceRelease}} ({{.SourceRelease}}){{end}}</p>{{else}}<p id="active-set">none active</p>{{end}}
<h2>Destinations</h2>
<table id="destinations"><tr><th>destination</th><th>consumer</th><th>pending</th><th>leased</th><th>oldest undelivered</th><th>oldest open gap</th><th>quarantined</th><th>quarantine reasons</th></tr>
{{range .Destinations}}<tr id="dest-{{.Destination}}"><td><a href="/console/deliveries?destination={{.Destination}}&amp;state=pending">{{.Destination}}</a></td><td>{{.ConsumerName}}</td>
<td class="n" id="pending-{{.Destination}}">{{.Pending}}</td><td class="n" id="leased-{{.Destination}}">{{.Leased}}</td>
<td id="oldest-{{.Destination}}">{{age .OldestPendingAge}}</td><td id="gap-{{.Destination}}">{{age .OldestGapAge}}</td>
<td class="n" id="quarantined-{{.Destination}}">{{.QuarantinedUnresolved}}</td>
<td id="reasons-{{.Destination}}">{{range $i, $q := .Quarantine}}{{if $i}}, {{end}}{{$q.Reason}}: {{$q.Count}}{{end}}</td></tr>
{{end}}</table>
<h2>Completeness proofs</h2>
{{if .Proofs}}<table id="proofs"><tr><th>scope</th><th>status</th><th>freshness</th><th>members</th><th>receipt anti-join</th><th>age</th><th>manifest</th></tr>
{{range $i, $p := .Proofs}}<tr id="proof-{{$i}}"><td><code>{{$p.SourceFilter}}</code></td><td id="proof-status-{{$i}}">{{$p.Status}}</td>
<td id="proof-freshness-{{$i}}" class="{{if eq $p.Freshness "verified_current"}}ok{{else}}bad{{end}}">{{$p.Freshness}}{{with $p.Reason}} ({{.}}){{end}}</td>
<td class="n" id="proof-members-{{$i}}">{{$p.MemberCount}}</td><td class="n" id="proof-antijoin-{{$i}}">{{i64 $p.ReceiptAntiJoin}}</td>
<td>{{age $p.Age}}</td><td><code title="{{$p.ManifestSHA256}}">{{short $p.ManifestSHA256}}</code></td></tr>
{{end}}</table>{{else}}<p id="proofs">no completeness proof taken yet</p>{{end}}
<h2 id="projections-heading">Projection versions</h2>
{{if .Projections}}<table id="projection-versions" aria-labelledby="projections-heading"><tr><th>projection</th><th>version</th><th>state</th><th>semantic digest</th><th>content rows</th><th>latest build</th><th>sources built</th><th>progress</th></tr>
{{$prog := .Progress}}{{range .Projections}}<tr id="pv-{{.ProjectionName}}-{{.ProjectionVersion}}"><td>{{.ProjectionName}}</td><td class="n">{{.ProjectionVersion}}</td><td class="pv-state">{{.State}}</td><td><code title="{{.SemanticDefinitionSHA256}}">{{short .SemanticDefinitionSHA256}}</code></td><td>{{with .RowSource}}<code>{{.}}</code>{{else}}-{{end}}</td><td>{{with .BuildState}}{{.}}{{else}}none{{end}}{{with .BuildStartedAt}} since {{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}</td><td class="n">{{with .SourcesBuilt}}{{.}}{{else}}-{{end}}</td><td class="pv-progress">{{with .BuildID}}{{with index $prog (str .)}}{{if .KnownBuild}}{{.State}}: {{.Built}} built, {{.Remaining}} to go, lag {{printf "%.0f" .LagSeconds}} s{{else}}-{{end}}{{end}}{{else}}-{{end}}</td></tr>
{{end}}</table>{{else}}<p id="projection-versions">no projection version is registered</p>{{end}}
{{if .ReadinessProofs}}<table id="readiness-proofs"><caption>cutover readiness proofs, newest first</caption><tr><th>decided</th><th>projection</th><th>from</th><th>to</th><th>result</th><th>reasons</th><th>proof</th></tr>
{{range .ReadinessProofs}}<tr class="readiness-proof"><td>{{.DecidedAt.UTC.Format "2006-01-02T15:04:05Z"}}</td><td>{{.ProjectionName}}</td><td class="n">{{.FromVersion}}</td><td class="n">{{.ToVersion}}</td><td class="rp-result">{{.Result}}</td><td>{{range $i, $r := .Reasons}}{{if $i}}, {{end}}{{$r}}{{end}}</td><td><code title="{{.ProofSHA256}}">{{short .ProofSHA256}}</code> ({{.ProofID}})</td></tr>
{{end}}</table>{{end}}
<h2 id="intake-heading">Observation intake, last hour</h2>
<p class="muted">Best-effort operational evidence, never domain facts. Health, not coverage: no denominator exists, and no observation does not mean no request.</p>
{{if .Intake}}<table id="intake-health" aria-labelledby="intake-heading"><tr><th>workload</th><th>newest window</th><th>worst window</th><th>accepted</th><th>send failures</th><th>rejections</th><th>last accepted</th></tr>
{{range .Intake}}<tr id="intake-{{.WorkloadPrincipalID}}"><td>{{.WorkloadPrincipalID}}</td><td class="{{if eq .Latest "healthy"}}ok{{else if eq .Latest "degraded"}}bad{{end}}">{{.Latest}}</td><td class="{{if eq .Worst "degraded"}}bad{{end}}">{{.Worst}}</td>
<td class="n">{{.Accepted}}</td><td class="n">{{.SendFailures}}</td><td class="n">{{.IntakeRejections}}</td><td>{{if .LastAcceptedAt.IsZero}}-{{else}}{{.LastAcceptedAt.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}</td></tr>
{{end}}</table>{{else}}<p id="intake-health">no workload is registered</p>{{end}}
{{if .Observations}}<table id="recent-observations"><caption>most recent accepted observations (no bodies)</caption><tr><th>accepted at</th><th>observation</th><th>workload</th><th>type</th><th>payload</th><th>projectors open</th></tr>
{{range .Observations}}<tr class="observation"><td>{{.AcceptedAt.UTC.Format "2006-01-02T15:04:05.000Z"}}</td><td><code>{{.ObservationID}}</code></td><td>{{.WorkloadPrincipalID}}</td><td>{{with .ObservationType}}{{.}}{{end}}{{with .SchemaVersion}}@{{.}}{{end}}</td><td>{{if .PayloadPurged}}purged{{else}}kept{{end}}</td><td class="n">{{.OpenProjectors}}</td></tr>
{{end}}</table>{{else}}<p id="recent-observations">no observation accepted yet</p>{{end}}
<h2>Search by exact id</h2>
<form method="get" action="/status" id="search-form">
<select name="kind">{{$k := ""}}{{with .Search}}{{$k = .Kind}}{{end}}{{range .Kinds}}<option value="{{.}}"{{if eq . $k}} selected{{end}}>{{.}}</option>{{end}}</select>
<input name="id" size="48" maxlength="200" value="{{with .Search}}{{.ID}}{{end}}"> <button type="submit">search</button>
</form>
{{with .Search}}<div id="search-result">
{{if .Error}}<p class="bad" id="search-error">{{.Error}}</p>{{else}}
<table><tr><th>result</th><th>reason</th><th>event</th><th>operation</th></tr>
{{range .Hits}}<tr class="hit"><td class="result">{{.Result}}</td><td class="reason">{{str .Reason}}</td><td class="event">{{with str .EventID}}<a href="/console/event?id={{.}}">{{.}}</a>{{end}}</td><td class="operation">{{str .OperationID}}</td></tr>
{{end}}</table>{{end}}</div>{{end}}
</body></html>
`))
