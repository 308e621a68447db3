package readmodel

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oceanway/pgoutbox/internal/pgcall"
)

// SearchKinds are the exact-id kinds of R-OP-3, in the order the search box offers them.
var SearchKinds = []string{"eventId", "operationId", "correlationId", "runId", "reservationId", "causationId"}

// Gauges are the read-model gauges (R-DP-4 style, low cardinality: at most MaxScopes scope
// label values, the canonical source filter of each scope's latest proof).
type Gauges struct {
	Registry      *prometheus.Registry
	AntiJoin      *prometheus.GaugeVec
	ProofAge      *prometheus.GaugeVec
	ProofCurrent  *prometheus.GaugeVec
	ProofComplete *prometheus.GaugeVec
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
	g.Registry.MustRegister(g.AntiJoin, g.ProofAge, g.ProofCurrent, g.ProofComplete)
	return g
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

// Server serves GET /status (the page and its search box) and GET /metrics. Every other method
// is 405: the page has no write action. DB must run as outbox_auditor (CheckAuditorOnly).
type Server struct {
	DB      pgcall.DBTX
	Gauges  *Gauges
	Logger  *slog.Logger
	Timeout time.Duration // per request; 0 = 30 s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
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
		promhttp.HandlerFor(s.Gauges.Registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	default:
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
<p>Read-only (auditor). Generated <span id="generated-at">{{.GeneratedAt.Format "2006-01-02T15:04:05Z"}}</span>. No payloads are shown.</p>
<h2>Active delivery set</h2>
{{with .Active}}<p id="active-set">version <span id="active-version">{{.DeliverySetVersion}}</span>, definition schema {{.DefinitionSchemaVersion}}, {{.DigestAlgorithmVersion}}, digest <code id="active-digest">{{.DefinitionDigest}}</code>{{if .SourceRelease}} ({{.SourceRelease}}){{end}}</p>{{else}}<p id="active-set">none active</p>{{end}}
<h2>Destinations</h2>
<table id="destinations"><tr><th>destination</th><th>consumer</th><th>pending</th><th>leased</th><th>oldest undelivered</th><th>oldest open gap</th><th>quarantined</th><th>quarantine reasons</th></tr>
{{range .Destinations}}<tr id="dest-{{.Destination}}"><td>{{.Destination}}</td><td>{{.ConsumerName}}</td>
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
<h2>Search by exact id</h2>
<form method="get" action="/status" id="search-form">
<select name="kind">{{$k := ""}}{{with .Search}}{{$k = .Kind}}{{end}}{{range .Kinds}}<option value="{{.}}"{{if eq . $k}} selected{{end}}>{{.}}</option>{{end}}</select>
<input name="id" size="48" maxlength="200" value="{{with .Search}}{{.ID}}{{end}}"> <button type="submit">search</button>
</form>
{{with .Search}}<div id="search-result">
{{if .Error}}<p class="bad" id="search-error">{{.Error}}</p>{{else}}
<table><tr><th>result</th><th>reason</th><th>event</th><th>operation</th></tr>
{{range .Hits}}<tr class="hit"><td class="result">{{.Result}}</td><td class="reason">{{str .Reason}}</td><td class="event">{{str .EventID}}</td><td class="operation">{{str .OperationID}}</td></tr>
{{end}}</table>{{end}}</div>{{end}}
</body></html>
`))
