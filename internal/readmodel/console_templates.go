package readmodel

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"
)

// barChart draws one series as an inline SVG bar chart. The chart is an image with a text
// alternative (role="img", aria-label and <title> with the total and the peak); the same totals
// are in the table beside it, so nothing is told by colour or shape alone.
func barChart(label string, vals []float64, unit string) template.HTML {
	const w, h = 240.0, 44.0
	peak, total := 0.0, 0.0
	for _, v := range vals {
		total += v
		peak = math.Max(peak, v)
	}
	alt := fmt.Sprintf("%s per minute over the last hour: peak %s%s", label, trimNum(peak), unit)
	if unit == "" {
		alt = fmt.Sprintf("%s per minute over the last hour: total %s, peak %s", label, trimNum(total), trimNum(peak))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" aria-label="%s" width="%d" height="%d" viewBox="0 0 %d %d"><title>%s</title>`,
		html.EscapeString(alt), int(w), int(h), int(w), int(h), html.EscapeString(alt))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#f6f6f6" stroke="#999"/>`, int(w), int(h))
	if n := len(vals); n > 0 && peak > 0 {
		bw := w / float64(n)
		for i, v := range vals {
			if v <= 0 {
				continue
			}
			bh := math.Max(1, (h-4)*v/peak)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#335"/>`, float64(i)*bw, h-bh, math.Max(bw-0.5, 0.5), bh)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: only numbers and escaped text
}

func trimNum(f float64) string {
	if f == math.Trunc(f) {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.1f", f)
}

func ints(v []int64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func ageText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

var consoleTemplates = template.Must(template.New("console").Funcs(template.FuncMap{
	"t":     fmtTime,
	"s":     deref,
	"count": countText,
	"age":   ageText,
	"bars":  func(label string, v []int64) template.HTML { return barChart(label, ints(v), "") },
	"lag":   func(v []float64) template.HTML { return barChart("largest ack lag", v, " s") },
	"secs":  func(f float64) string { return trimNum(f) + " s" },
	"q":     func(s string) string { return template.URLQueryEscaper(s) },
	"int64": func(n int) int64 { return int64(n) },
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
}).Parse(consoleHTML))

const consoleHTML = `
{{define "head"}}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} - pgoutbox console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:sans-serif;margin:1.2em;color:#222;line-height:1.35}
a{color:#0645ad} a:focus,button:focus,input:focus,select:focus,textarea:focus,summary:focus{outline:3px solid #f90;outline-offset:1px}
nav ul{list-style:none;padding:0;margin:0 0 1em 0;display:flex;gap:1.2em;flex-wrap:wrap}
table{border-collapse:collapse;margin-bottom:1.2em}
th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#eee} td.n{text-align:right}
code{font-size:.92em} .muted{color:#555}
.state{font-weight:bold} .state-quarantined::before{content:"\26A0  "} .state-acknowledged::before{content:"\2713  "}
label{display:block;margin-top:.4em;font-weight:bold}
input[type=text],textarea{width:28em;max-width:95%}
.warn{border:2px solid #a60;padding:.5em;background:#fff8e6}
.err{border:2px solid #a00;padding:.5em;background:#fdeaea}
.okbox{border:2px solid #075;padding:.5em;background:#eaf7ef}
svg.chart{vertical-align:middle}
</style></head><body>
<a href="#main" class="muted">skip to content</a>
<header><nav aria-label="console"><ul>
<li><a href="/console">overview</a></li><li><a href="/console/deliveries">deliveries</a></li>
<li><a href="/console/quarantine">quarantine</a></li><li><a href="/console/event">find an event</a></li><li><a href="/status">status page</a></li>
</ul></nav>
<p class="muted" id="mode">{{if .Operator}}Operator console (outbox_operator session): the redeliver action is available; every re-delivery is audited.{{else}}Read-only console (outbox_auditor): no write action exists on these pages.{{end}}
Page generated <time id="as-of" datetime="{{.AsOf.Format "2006-01-02T15:04:05Z07:00"}}">{{t .AsOf}}</time>.</p></header>
<main id="main">
{{end}}

{{define "foot"}}</main></body></html>
{{end}}

{{define "problem"}}{{template "head" .}}<h1>Request refused</h1><p class="err" id="problem" role="alert">{{.Message}}</p>{{template "foot" .}}{{end}}

{{define "lookup"}}<form method="get" action="/console/event" id="lookup-form" role="search">
<label for="lookup-id">Event id</label>
<input type="text" id="lookup-id" name="id" size="40" maxlength="36" value="{{.}}" placeholder="00000000-0000-0000-0000-000000000000" autocomplete="off">
<button type="submit">open</button></form>{{end}}

{{define "overview"}}{{template "head" .}}
<h1>Operator console</h1>
{{template "lookup" ""}}
<h2>Deliveries by destination and state</h2>
<p class="muted">Counts stop at 10000 ("10000+"), so they stay fast at any history size. Each number opens the list, oldest first.</p>
<table id="overview-counts"><caption class="muted">deliveries per destination and state</caption>
<tr><th scope="col">destination</th><th scope="col">consumer</th><th scope="col">pending</th><th scope="col">leased</th><th scope="col">quarantined</th><th scope="col">acknowledged</th><th scope="col">oldest undelivered</th></tr>
{{range .Destinations}}{{$d := .Destination}}<tr><th scope="row">{{.Destination}}</th><td>{{.ConsumerName}}</td>
{{range .Counts}}<td class="n"><a id="count-{{$d}}-{{.Status}}" href="/console/deliveries?destination={{$d}}&amp;state={{.Status}}" aria-label="{{.Status}} deliveries of {{$d}}: {{count .}}">{{count .}}</a></td>{{end}}
<td>{{age .OldestPendingAge}}</td></tr>{{end}}</table>
<h2 id="activity-heading">Activity, last hour</h2>
<p><span id="refresh-status" class="muted" aria-live="polite">auto-refresh needs JavaScript; reload the page to refresh</span>
<button type="button" id="refresh-now" hidden>refresh now</button></p>
<section id="activity" aria-labelledby="activity-heading">{{template "activity" .Activity}}</section>
<h2 id="mailbox-heading">Mailbox pipeline</h2>
{{if .Mailbox}}<table id="mailbox-sources" aria-labelledby="mailbox-heading"><caption class="muted">per source, from mailbox.pipeline_status</caption>
<tr><th scope="col">source</th><th scope="col">watermark</th><th scope="col">unfinished</th><th scope="col">oldest unfinished</th><th scope="col">open / released holes</th><th scope="col">late rows</th><th scope="col">head</th><th scope="col">abandoned backfills</th><th scope="col">dead letters</th></tr>
{{range .Mailbox}}<tr id="mailbox-{{.Source}}"><th scope="row">{{.Source}}</th><td class="n">{{.Watermark}}</td><td class="n">{{.LagIDs}}</td><td>{{printf "%.0f s" .LagSeconds}}</td><td class="n">{{.OpenHoles}} / {{.ReleasedHoles}}</td><td class="n">{{.LateRows}}</td><td>{{if .HeadMsgID}}{{.HeadMsgID}} ({{.HeadState}}){{else}}none{{end}}</td><td class="n">{{.AbandonedBackfills}}</td><td class="n">{{.DeadLetters}}</td></tr>{{end}}
</table>{{else}}<p id="mailbox-none" class="muted">No mailbox source is registered.</p>{{end}}
<script src="/console/console.js" defer></script>
{{template "foot" .}}{{end}}

{{define "activity"}}<p>Data as of <time id="activity-as-of" datetime="{{.AsOf.Format "2006-01-02T15:04:05Z07:00"}}">{{t .AsOf}}</time>, one bar per minute since {{t .From}}, read from the attempt history in the database.</p>
<table id="activity-table"><caption class="muted">per destination, last hour (numbers are the text alternative of the charts)</caption>
<tr><th scope="col">destination</th><th scope="col">attempts finished</th><th scope="col">acknowledged</th><th scope="col">retried</th><th scope="col">quarantined</th><th scope="col">largest ack lag</th><th scope="col">pending / leased now</th><th scope="col">oldest undelivered now</th></tr>
{{range .Series}}<tr id="activity-{{.Destination}}"><th scope="row">{{.Destination}}</th>
<td><span class="n" id="finished-{{.Destination}}">{{.TotalFinished}}</span> {{bars "attempts finished" .Finished}}</td>
<td><span class="n" id="acks-{{.Destination}}">{{.TotalAcks}}</span> {{bars "acknowledgements" .Acknowledged}}</td>
<td><span class="n" id="retries-{{.Destination}}">{{.TotalRetries}}</span> {{bars "retries" .Retried}}</td>
<td class="n" id="quarantines-{{.Destination}}">{{.TotalQuar}}</td>
<td><span id="lag-{{.Destination}}">{{secs .MaxLag}}</span> {{lag .Lag}}</td>
<td class="n">{{.Pending}} / {{.Leased}}</td><td>{{age .OldestPendingAge}}</td></tr>{{end}}
</table>{{end}}

{{define "list"}}{{template "head" .}}
<h1>Deliveries</h1>
<form method="get" action="/console/deliveries" id="filter-form">
<label for="f-destination">Destination</label>
<select id="f-destination" name="destination"><option value="">choose…</option>{{$sel := .Destination}}{{range .Destinations}}<option value="{{.}}"{{if eq . $sel}} selected{{end}}>{{.}}</option>{{end}}</select>
<label for="f-state">State</label>
<select id="f-state" name="state">{{$st := .State}}{{range .States}}<option value="{{.}}"{{if eq . $st}} selected{{end}}>{{.}}</option>{{end}}</select>
<button type="submit">filter</button></form>
{{if .Destination}}{{$d := .Destination}}
<p id="state-counts">{{range $i, $c := .Counts}}{{if $i}} · {{end}}<a href="/console/deliveries?destination={{$d}}&amp;state={{$c.Status}}"{{if eq $c.Status $st}} aria-current="page"{{end}}>{{$c.Status}}: {{count $c}}</a>{{end}}</p>
<h2 id="list-heading">{{.State}} deliveries of {{.Destination}}, oldest first{{if .After}} (continued){{end}}</h2>
{{if .Items}}<table id="deliveries" aria-labelledby="list-heading">
<tr><th scope="col">event</th><th scope="col">type</th><th scope="col">state</th><th scope="col">created</th><th scope="col">available</th><th scope="col">attempts</th><th scope="col">last error</th><th scope="col">lease owner / expiry</th><th scope="col">delivered</th></tr>
{{range .Items}}<tr class="item"><td><a class="event-link" href="/console/event?id={{.EventID}}"><code>{{.EventID}}</code></a></td><td>{{.EventType}}</td>
<td class="state state-{{.Status}}">{{.Status}}</td><td>{{t .CreatedAt}}</td><td>{{t .AvailableAt}}</td><td class="n">{{.AttemptCount}}</td>
<td>{{s .LastErrorCode}}</td><td>{{s .LeaseOwner}} {{if .LeaseExpiresAt}}until {{t .LeaseExpiresAt}}{{end}}</td><td>{{t .DeliveredAt}}</td></tr>
{{end}}</table>{{else}}<p id="deliveries">no {{.State}} deliveries{{if .After}} after this point{{end}}</p>{{end}}
<p>{{if .After}}<a href="/console/deliveries?destination={{$d}}&amp;state={{.State}}" id="first-page">first page</a>{{end}}
{{if .Next}} <a href="/console/deliveries?destination={{$d}}&amp;state={{.State}}&amp;after={{.Next}}{{if ne .Limit 50}}&amp;limit={{.Limit}}{{end}}" id="next-page" rel="next">next page</a>{{end}}</p>
{{end}}
{{template "foot" .}}{{end}}

{{define "redeliver-form"}}{{/* . = struct with Destination, EventID, Key, CSRF */}}
<form method="post" action="/console/redeliver" class="redeliver-form">
<input type="hidden" name="csrf" value="{{.CSRF}}"><input type="hidden" name="destination" value="{{.Destination}}"><input type="hidden" name="event_id" value="{{.EventID}}">
<label for="case-{{.ID}}">Case id</label><input type="text" id="case-{{.ID}}" name="case_id" required maxlength="128" pattern="[A-Za-z0-9][A-Za-z0-9._:/\-]*" aria-describedby="case-help-{{.ID}}">
<span id="case-help-{{.ID}}" class="muted">letters, digits and . _ : / - (your ticket number)</span>
<label for="reason-{{.ID}}">Reason (no payload content)</label><textarea id="reason-{{.ID}}" name="reason" required maxlength="500" rows="2"></textarea>
<label for="key-{{.ID}}">Idempotency key</label><input type="text" id="key-{{.ID}}" name="idempotency_key" required maxlength="128" value="{{.Key}}" aria-describedby="key-help-{{.ID}}">
<span id="key-help-{{.ID}}" class="muted">sending the same form again re-uses this key and re-delivers nothing twice</span>
<p><button type="submit">re-deliver the original event</button></p></form>{{end}}

{{define "event"}}{{template "head" .}}
<h1>Event {{if .ID}}<code id="event-id">{{.ID}}</code>{{else}}lookup{{end}}</h1>
{{template "lookup" .ID}}
{{if .NotFound}}<p class="warn" id="not-found" role="status">No event with this id in the hot tables (it may never have existed, or it was archived: see docs/retention.md).</p>{{end}}
{{with .Event}}{{$op := $.Operator}}
<h2>Envelope</h2>
<table id="envelope"><tr><th scope="row">type</th><td id="event-type">{{.EventType}} (schema {{.SchemaVersion}})</td></tr>
<tr><th scope="row">envelope digest</th><td><code id="envelope-digest">{{.EnvelopeDigestAlgorithm}}:{{.EnvelopeSHA256}}</code></td></tr>
<tr><th scope="row">delivery-set quartet</th><td id="event-quartet">version {{.DeliverySetVersion}}, definition schema {{.DefinitionSchemaVersion}}, {{.DigestAlgorithmVersion}}, <code>{{.DefinitionDigest}}</code></td></tr>
<tr><th scope="row">aggregate</th><td>{{.AggregateID}} revision {{.AggregateRevision}}</td></tr>
<tr><th scope="row">tenant</th><td>{{.TenantKind}} {{.TenantID}}, workspace {{.WorkspaceID}}{{if .ProjectID}}, project {{s .ProjectID}}{{end}}</td></tr>
<tr><th scope="row">operation / correlation / causation</th><td>{{s .OperationID}} / {{s .CorrelationID}} / {{s .CausationID}}</td></tr>
<tr><th scope="row">occurred / appended</th><td>{{t .OccurredAt}} / {{t .CreatedAt}}</td></tr>
<tr><th scope="row">publication</th><td id="publication">{{if .PublishedAt}}published at {{t .PublishedAt}}{{else}}not published: a mandatory delivery is not acknowledged yet{{end}}</td></tr>
<tr><th scope="row">payload</th><td id="payload">{{if $.ShowPayload}}<pre id="payload-body">{{$.Payload}}</pre>{{else}}hidden ({{.PayloadBytes}} bytes){{if $.Payloads}} - <a href="/console/event?id={{.EventID}}&amp;payload=show" id="show-payload">show payload</a>{{else}}; this console was started without -show-payloads{{end}}{{end}}</td></tr>
</table>
<h2>Deliveries</h2>
{{range $i, $d := $.Deliveries}}
<section class="delivery" id="delivery-{{.Destination}}" aria-labelledby="dh-{{.Destination}}">
<h3 id="dh-{{.Destination}}">{{.Destination}}: <span class="state state-{{.Status}}" id="status-{{.Destination}}">{{.Status}}</span></h3>
<table><tr><th scope="row">frozen member</th><td id="member-{{.Destination}}">consumer {{.ConsumerName}}, receipt {{.ExpectedReceiptType}} v{{.ExpectedReceiptSchemaVersion}}, projection {{s .ProjectionState}}{{if .RequiredProjectionName}} ({{s .RequiredProjectionName}} v{{s .RequiredProjectionVersion}}){{end}}, {{if .Mandatory}}mandatory{{else}}optional{{end}}</td></tr>
<tr><th scope="row">timing</th><td>created {{t .CreatedAt}}, available {{t .AvailableAt}}, last attempt {{t .LastAttemptAt}}{{if .LeaseOwner}}, leased by {{s .LeaseOwner}} until {{t .LeaseExpiresAt}}{{end}}</td></tr>
<tr><th scope="row">attempts</th><td>{{.AttemptCount}}{{if .RecoveryAttemptBase}} ({{.RecoveryAttemptBase}} before the last recovery){{end}}; recoveries {{.Recoveries}}</td></tr>
<tr><th scope="row">last error</th><td>{{s .LastErrorCode}} {{if .LastErrorRef}}(ref <code>{{s .LastErrorRef}}</code>){{end}}</td></tr>
<tr><th scope="row">receipt</th><td id="receipt-{{.Destination}}">{{if .ReceiptDigest}}{{s .ReceiptKind}} / {{s .ReceiptType}}: ref <code>{{s .ReceiptRef}}</code>, schema {{s .ReceiptSchemaVersion}}, {{s .ReceiptDigestAlgorithm}}, digest <code>{{s .ReceiptDigest}}</code>; delivered {{t .DeliveredAt}}{{else}}none yet{{end}}</td></tr>
{{if .QuarantineReason}}<tr><th scope="row">quarantine</th><td id="quarantine-{{.Destination}}">{{s .QuarantineReason}} since {{t .QuarantinedAt}}{{if .CaseID}}, case {{s .CaseID}}{{end}}</td></tr>{{end}}
</table>
<table class="attempts" id="attempts-{{.Destination}}"><caption>attempt history of {{.Destination}}</caption>
<tr><th scope="col">#</th><th scope="col">worker</th><th scope="col">started</th><th scope="col">finished</th><th scope="col">outcome</th><th scope="col">disposition</th><th scope="col">error code</th><th scope="col">sanitized ref</th></tr>
{{range .Attempts}}<tr class="attempt"><td class="n">{{.AttemptNumber}}</td><td>{{.Worker}}</td><td>{{t .StartedAt}}</td><td>{{if .FinishedAt}}{{t .FinishedAt}}{{else}}in flight{{end}}</td>
<td class="outcome">{{s .Outcome}}</td><td>{{s .RetryDisposition}}</td><td class="error-code">{{s .ErrorCode}}</td><td>{{if .ErrorRef}}<code>{{s .ErrorRef}}</code>{{else}}-{{end}}</td></tr>
{{else}}<tr><td colspan="8">no attempt yet</td></tr>{{end}}</table>
{{with .Preview}}<div class="preview"><h4>Re-delivery preview</h4><p id="preview-{{.Destination}}">{{.WouldChange}}</p></div>
{{if $op}}{{template "redeliver-form" (dict "ID" (printf "d%d" $i) "Destination" .Destination "EventID" .EventID "Key" $d.Key "CSRF" $.CSRF)}}{{end}}{{end}}
</section>{{end}}
{{end}}
{{template "foot" .}}{{end}}

{{define "quarantine"}}{{template "head" .}}
<h1>Quarantine, grouped by reason</h1>
<form method="get" action="/console/quarantine" id="quarantine-filter">
<label for="qf-destination">Destination</label><select id="qf-destination" name="destination"><option value="">all</option>{{$sd := .Destination}}{{range .Destinations}}<option value="{{.}}"{{if eq . $sd}} selected{{end}}>{{.}}</option>{{end}}</select>
<label for="qf-reason">Reason</label><select id="qf-reason" name="reason"><option value="">all</option>{{$sr := .Reason}}{{range .Reasons}}<option value="{{.}}"{{if eq . $sr}} selected{{end}}>{{.}}</option>{{end}}</select>
<button type="submit">filter</button></form>
{{if not .Groups}}<p id="no-quarantine">nothing is quarantined{{if or .Destination .Reason}} for this filter{{end}}</p>{{end}}
{{range $g, $grp := .Groups}}
<section class="qgroup" aria-labelledby="qg-{{$g}}"><h2 id="qg-{{$g}}">{{.Destination}} - <span class="reason">{{.Reason}}</span>: <span class="qcount">{{.Count}}</span></h2>
{{if gt .Count (len .Items | int64)}}<p class="muted">showing the newest {{len .Items}}; <a href="/console/deliveries?destination={{.Destination}}&amp;state=quarantined">all quarantined deliveries of {{.Destination}}</a>, oldest first</p>{{end}}
{{range $i, $it := .Items}}<article class="qitem" aria-labelledby="qi-{{$g}}-{{$i}}">
<h3 id="qi-{{$g}}-{{$i}}"><a class="event-link" href="/console/event?id={{.EventID}}"><code>{{.EventID}}</code></a> {{.EventType}}</h3>
<p>last error {{s .LastErrorCode}}, {{.AttemptCount}} attempts, quarantined {{t .QuarantinedAt}}{{if .CaseID}}, case {{s .CaseID}}{{end}}, re-delivered {{.Recoveries}} time(s) before</p>
<p class="preview"><strong>Preview:</strong> <span class="would-change">{{.Preview.WouldChange}}</span></p>
{{if $.Operator}}<details{{if and (eq $g 0) (eq $i 0)}} open{{end}}><summary>re-deliver {{.EventID}} to {{.Destination}}</summary>{{template "redeliver-form" (dict "ID" (printf "q%d-%d" $g $i) "Destination" .Destination "EventID" .EventID "Key" $it.Key "CSRF" $.CSRF)}}</details>{{end}}
</article>{{end}}</section>{{end}}
{{template "foot" .}}{{end}}

{{define "redelivered"}}{{template "head" .}}
<h1>Re-delivered</h1>
<p class="okbox" id="redelivered" role="status">The original event <a href="/console/event?id={{.EventID}}"><code>{{.EventID}}</code></a> is due again at {{.Destination}}: status <strong id="new-status">{{.Status}}</strong>, audit row <code id="recovery-id">{{.RecoveryID}}</code> (case {{.CaseID}}, key {{.IdempotencyKey}}). Sending the same key again returns this same audit row.</p>
<p><a href="/console/quarantine">back to the quarantine</a></p>
{{template "foot" .}}{{end}}
`
