package readmodel

// consoleHTML holds the console's pages. Ids are stable: tests and operators' scripts read them.
// No inline style or script (CSP: style-src 'self', script-src 'self'): the look is
// console.css, the live refresh and the copy buttons are console.js.
const consoleHTML = `
{{define "head"}}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} - pgoutbox console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<link rel="stylesheet" href="/console/console.css">
</head><body>
<a href="#main" class="skip">skip to content</a>
<header class="topbar"><div class="inner">
<a class="brand" href="/console">pgoutbox console</a>
<nav aria-label="console"><ul>
<li><a href="/console"{{if eq .Nav "overview"}} aria-current="page"{{end}}>overview</a></li>
<li><a href="/console/search"{{if eq .Nav "search"}} aria-current="page"{{end}}>search</a></li>
<li><a href="/console/deliveries"{{if eq .Nav "deliveries"}} aria-current="page"{{end}}>deliveries</a></li>
<li><a href="/console/quarantine"{{if eq .Nav "quarantine"}} aria-current="page"{{end}}>quarantine</a></li>
<li><a href="/console/event"{{if eq .Nav "event"}} aria-current="page"{{end}}>find an event</a></li>
<li><a href="/status">status page</a></li>
</ul></nav>
<form class="quicksearch" method="get" action="/console/search" role="search" aria-label="quick search">
<select name="kind" aria-label="search by">{{range $.Kinds}}<option value="{{.}}">{{.}}</option>{{end}}</select>
<input type="search" name="q" aria-label="value to search" placeholder="id, type, destination, error code" maxlength="200" autocomplete="off">
<button type="submit">search</button></form>
</div></header>
<p class="mode" id="mode">{{if .Operator}}<strong>Operator console</strong> (outbox_operator session): re-deliver, pause and resume are available; every action is audited under your login.{{else}}<strong>Read-only console</strong> (outbox_auditor): no write action exists on these pages.{{end}}
Page generated <time id="as-of" datetime="{{.AsOf.Format "2006-01-02T15:04:05Z07:00"}}">{{t .AsOf}}</time>.</p>
<main id="main">
{{end}}

{{define "foot"}}</main><script src="/console/console.js" defer></script></body></html>
{{end}}

{{define "problem"}}{{template "head" .}}<h1>Request refused</h1><p class="err" id="problem" role="alert">{{.Message}}</p>{{template "foot" .}}{{end}}

{{define "lookup"}}<form method="get" action="/console/event" id="lookup-form" role="search" class="formrow">
<div><label for="lookup-id">Event id</label>
<input type="text" id="lookup-id" name="id" size="40" maxlength="36" value="{{.}}" placeholder="00000000-0000-0000-0000-000000000000" autocomplete="off"></div>
<div><button type="submit">open</button></div></form>{{end}}

{{define "cmd"}}<div class="cmd"><code>{{.}}</code><button type="button" class="copy" data-copy="{{.}}" hidden>copy command</button></div>{{end}}

{{define "overview"}}{{template "head" .}}
<h1>Overview</h1>
<p><span id="refresh-status" class="live-status" aria-live="polite">live update needs JavaScript; reload the page to refresh</span>
<button type="button" class="secondary" id="refresh-now" hidden>refresh now</button></p>
<div id="live" data-interval="{{.Live.IntervalSeconds}}">{{template "live" .Live}}</div>
{{template "foot" .}}{{end}}

{{define "live"}}<p class="muted">Data as of <time id="live-as-of" datetime="{{.AsOf.Format "2006-01-02T15:04:05.000Z07:00"}}">{{t .AsOf}}</time>, read from the database now.</p>
<section aria-labelledby="tiles-heading"><h2 id="tiles-heading" class="skip">Totals</h2>
<div class="tiles">
<div class="tile"><span class="label">backlog (pending + leased)</span><span class="value" id="tile-backlog">{{.Backlog}}{{if .BacklogCapped}}+{{end}}</span></div>
<div class="tile"><span class="label">oldest undelivered</span><span class="value" id="tile-oldest">{{age .Oldest}}</span></div>
<div class="tile"><span class="label">acknowledged, last hour</span><span class="value" id="tile-acks">{{.Acks}}</span></div>
<div class="tile{{if .Failures}} alert{{end}}"><span class="label">failures, last hour</span><span class="value" id="tile-failures">{{.Failures}}</span></div>
<div class="tile{{if .Quarantined}} alert{{end}}"><span class="label">open quarantine</span><span class="value" id="tile-quarantined">{{.Quarantined}}</span></div>
<div class="tile{{if .Gaps}} alert{{end}}"><span class="label">open revision gaps</span><span class="value" id="tile-gaps">{{.Gaps}}</span></div>
<div class="tile"><span class="label">destinations paused</span><span class="value" id="tile-paused">{{.Paused}}</span></div>
</div></section>

<h2 id="dest-heading">Destinations</h2>
<div class="table-wrap"><table id="destinations" aria-labelledby="dest-heading">
<caption>backlog, oldest undelivered, open quarantine and revision gaps per destination, and whether its claims run</caption>
<thead><tr><th scope="col">destination</th><th scope="col">claims</th><th scope="col" class="n">pending</th><th scope="col" class="n">leased</th><th scope="col">oldest undelivered</th><th scope="col" class="n">quarantined</th><th scope="col" class="n">open gaps</th><th scope="col" class="n">acks / h</th><th scope="col" class="n">failures / h</th><th scope="col">actions</th></tr></thead>
<tbody>{{range .Dests}}<tr id="dest-{{.Destination}}"><th scope="row"><a href="/console/search?kind=destination&amp;q={{q .Destination}}">{{.Destination}}</a><span class="sub">{{.ConsumerName}}</span></th>
<td id="claims-{{.Destination}}">{{if .PausedReason}}{{badge "paused"}}<br><span class="muted">{{s .PausedReason}} ({{s .PausedBy}}, {{since .PausedAt $.AsOf}} ago)</span>{{else}}{{badge "running"}}{{end}}</td>
<td class="n"><a id="pending-{{.Destination}}" href="/console/deliveries?destination={{q .Destination}}&amp;state=pending">{{capped .Pending}}</a></td>
<td class="n"><a id="leased-{{.Destination}}" href="/console/deliveries?destination={{q .Destination}}&amp;state=leased">{{capped .Leased}}</a></td>
<td id="oldest-{{.Destination}}">{{since .OldestPendingAt $.AsOf}}</td>
<td class="n"><a id="quarantined-{{.Destination}}" href="/console/quarantine?destination={{q .Destination}}">{{capped .QuarantinedOpen}}</a></td>
<td class="n" id="gaps-{{.Destination}}">{{capped .OpenGaps}}{{if .OldestGapAt}} <span class="muted">(oldest {{since .OldestGapAt $.AsOf}})</span>{{end}}</td>
<td class="n" id="rate-{{.Destination}}">{{.Acks}}</td><td class="n" id="failures-{{.Destination}}">{{.Failures}}</td>
<td class="actions">{{if $.Operator}}{{if .PausedReason}}<form method="post" action="/console/resume" class="pause-form" id="resume-form-{{.Destination}}">
<input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="destination" value="{{.Destination}}">
<button type="submit" class="secondary" id="resume-{{.Destination}}">resume claims</button></form>
{{else}}<details class="pause-form"><summary>pause claims</summary><form method="post" action="/console/pause" id="pause-form-{{.Destination}}">
<input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="destination" value="{{.Destination}}">
<label for="pause-reason-{{.Destination}}">Reason (audited)</label><input type="text" id="pause-reason-{{.Destination}}" name="reason" required maxlength="500">
<p><button type="submit" class="danger" id="pause-{{.Destination}}">pause claims of {{.Destination}}</button></p></form></details>{{end}}{{end}}
<details><summary>command</summary>{{if .PausedReason}}{{template "cmd" (printf "outboxctl projection resume %s" (sh .Destination))}}{{else}}{{template "cmd" (printf "outboxctl projection pause %s 'REASON'" (sh .Destination))}}{{end}}</details></td></tr>
{{end}}</tbody></table></div>

<h2 id="charts-heading">Delivery rate and failures, last hour</h2>
<p class="muted">One bar per minute, from the attempt history in the database. Failures are retries and quarantines. The table under the charts holds the same numbers.</p>
<div class="charts" aria-labelledby="charts-heading">{{range .Activity.Series}}
<figure class="chartbox" id="chart-rate-{{.Destination}}"><figcaption>{{.Destination}}: acknowledged <span class="muted">total {{.TotalAcks}}</span></figcaption>{{if .TotalAcks}}{{rate "acknowledgements" .Acknowledged false}}{{else}}<p class="muted nochart">no acknowledgement in the last hour</p>{{end}}</figure>
<figure class="chartbox" id="chart-failures-{{.Destination}}"><figcaption>{{.Destination}}: failures <span class="muted">total {{.Failed}}</span></figcaption>{{if .Failed}}{{rate "failures (retries and quarantines)" .Failures true}}{{else}}<p class="muted nochart">no failure in the last hour</p>{{end}}</figure>
{{end}}</div>

<h2>Deliveries by destination and state</h2>
<div class="table-wrap"><table id="overview-counts"><caption>deliveries per destination and state; counts stop at 10000 ("10000+") so they stay fast at any history size; each number opens the list, oldest first</caption>
<thead><tr><th scope="col">destination</th><th scope="col">consumer</th><th scope="col" class="n"><span class="state state-pending">pending</span></th><th scope="col" class="n"><span class="state state-leased">leased</span></th><th scope="col" class="n"><span class="state state-quarantined">quarantined</span></th><th scope="col" class="n"><span class="state state-acknowledged">acknowledged</span></th></tr></thead>
<tbody>{{range .Dests}}{{$d := .Destination}}<tr><th scope="row">{{.Destination}}</th><td>{{.ConsumerName}}</td>
{{range .Counts}}<td class="n"><a id="count-{{$d}}-{{.Status}}" href="/console/deliveries?destination={{q $d}}&amp;state={{.Status}}" aria-label="{{.Status}} deliveries of {{$d}}: {{count .}}">{{count .}}</a></td>{{end}}</tr>{{end}}</tbody></table></div>

<h2 id="activity-heading">Activity detail, last hour</h2>
<section id="activity" aria-labelledby="activity-heading">{{template "activity" .Activity}}</section>

<h2 id="projections-heading">Projection versions</h2>
{{if .Projections}}<div class="table-wrap"><table id="projection-versions" aria-labelledby="projections-heading"><caption>every registered version, its latest build and the build's progress</caption>
<thead><tr><th scope="col">projection</th><th scope="col" class="n">version</th><th scope="col">state</th><th scope="col">latest build</th><th scope="col">progress</th></tr></thead>
<tbody>{{$prog := .Progress}}{{range .Projections}}<tr id="pv-{{.ProjectionName}}-{{.ProjectionVersion}}"><th scope="row">{{.ProjectionName}}</th><td class="n">{{.ProjectionVersion}}</td><td>{{badge .State}}</td>
<td>{{with .BuildState}}{{badge (s .)}}{{else}}none{{end}}{{with .BuildStartedAt}} <span class="muted">since {{t .}}</span>{{end}}</td>
<td class="pv-progress">{{with .BuildID}}{{with index $prog (s .)}}{{if .KnownBuild}}<progress max="{{pmax .Built .Remaining}}" value="{{.Built}}" aria-label="sources built">{{.Built}} built</progress> {{.Built}} built, {{.Remaining}} to go, lag {{printf "%.0f" .LagSeconds}} s{{end}}{{else}}-{{end}}{{else}}-{{end}}</td></tr>
{{end}}</tbody></table></div>{{else}}<p id="projection-versions" class="muted">No projection version is registered.</p>{{end}}

<h2 id="intake-heading">Observation intake, last hour</h2>
{{if .Intake}}<div class="table-wrap"><table id="intake-health" aria-labelledby="intake-heading"><caption>health windows per workload: best-effort evidence, health not coverage</caption>
<thead><tr><th scope="col">workload</th><th scope="col">newest window</th><th scope="col">worst window</th><th scope="col" class="n">accepted</th><th scope="col" class="n">send failures</th><th scope="col" class="n">rejections</th><th scope="col">last accepted</th></tr></thead>
<tbody>{{range .Intake}}<tr id="intake-{{.WorkloadPrincipalID}}"><th scope="row">{{.WorkloadPrincipalID}}</th><td>{{badge .Latest}}</td><td>{{badge .Worst}}</td><td class="n">{{.Accepted}}</td><td class="n">{{.SendFailures}}</td><td class="n">{{.IntakeRejections}}</td><td>{{if .LastAcceptedAt.IsZero}}-{{else}}{{t .LastAcceptedAt}}{{end}}</td></tr>
{{end}}</tbody></table></div>{{else}}<p id="intake-health" class="muted">No workload is registered.</p>{{end}}

<h2 id="mailbox-heading">Mailbox pipeline</h2>
{{if .Mailbox}}<div class="table-wrap"><table id="mailbox-sources" aria-labelledby="mailbox-heading"><caption>per source, from mailbox.pipeline_status</caption>
<thead><tr><th scope="col">source</th><th scope="col">watermark</th><th scope="col">unfinished</th><th scope="col">oldest unfinished</th><th scope="col">open / released holes</th><th scope="col">late rows</th><th scope="col">head</th><th scope="col">abandoned backfills</th><th scope="col">dead letters</th></tr></thead>
<tbody>{{range .Mailbox}}<tr id="mailbox-{{.Source}}"><th scope="row">{{.Source}}</th><td class="n">{{.Watermark}}</td><td class="n">{{.LagIDs}}</td><td>{{printf "%.0f s" .LagSeconds}}</td><td class="n">{{.OpenHoles}} / {{.ReleasedHoles}}</td><td class="n">{{.LateRows}}</td><td>{{if .HeadMsgID}}{{.HeadMsgID}} ({{.HeadState}}){{else}}none{{end}}</td><td class="n">{{.AbandonedBackfills}}</td><td class="n">{{.DeadLetters}}</td></tr>{{end}}
</tbody></table></div>{{else}}<p id="mailbox-none" class="muted">No mailbox source is registered.</p>{{end}}
{{end}}

{{define "activity"}}<p class="muted">Data as of <time id="activity-as-of" datetime="{{.AsOf.Format "2006-01-02T15:04:05Z07:00"}}">{{t .AsOf}}</time>, one bar per minute since {{t .From}}, read from the attempt history in the database.</p>
<div class="table-wrap"><table id="activity-table"><caption>per destination, last hour (numbers are the text alternative of the charts)</caption>
<thead><tr><th scope="col">destination</th><th scope="col">attempts finished</th><th scope="col">acknowledged</th><th scope="col">retried</th><th scope="col" class="n">quarantined</th><th scope="col">largest ack lag</th><th scope="col" class="n">pending / leased now</th><th scope="col">oldest undelivered now</th></tr></thead>
<tbody>{{range .Series}}<tr id="activity-{{.Destination}}"><th scope="row">{{.Destination}}</th>
<td><span class="n" id="finished-{{.Destination}}">{{.TotalFinished}}</span> {{bars "attempts finished" .Finished}}</td>
<td><span class="n" id="acks-{{.Destination}}">{{.TotalAcks}}</span> {{bars "acknowledgements" .Acknowledged}}</td>
<td><span class="n" id="retries-{{.Destination}}">{{.TotalRetries}}</span> {{bars "retries" .Retried}}</td>
<td class="n" id="quarantines-{{.Destination}}">{{.TotalQuar}}</td>
<td><span id="lag-{{.Destination}}">{{secs .MaxLag}}</span> {{lag .Lag}}</td>
<td class="n">{{capped .Pending}} / {{capped .Leased}}</td><td>{{age .OldestPendingAge}}</td></tr>{{end}}
</tbody></table></div>{{end}}

{{define "search"}}{{template "head" .}}
<h1>Search</h1>
<form method="get" action="/console/search" id="search-form" class="panel" role="search">
<div class="formrow">
<div><label for="s-kind">Search by</label><select id="s-kind" name="kind">{{$k := .Kind}}{{range .Kinds}}<option value="{{.}}"{{if eq . $k}} selected{{end}}>{{.}}</option>{{end}}</select></div>
<div><label for="s-q">Value (exact)</label><input type="text" class="wide" id="s-q" name="q" value="{{.Value}}" maxlength="200" autocomplete="off" aria-describedby="s-help"></div>
<div><label for="s-from">From (UTC, inclusive)</label><input type="datetime-local" id="s-from" name="from" step="1" value="{{.From}}"></div>
<div><label for="s-to">To (UTC, exclusive)</label><input type="datetime-local" id="s-to" name="to" step="1" value="{{.To}}"></div>
<div><button type="submit" id="s-submit">search</button></div></div>
<p id="s-help" class="muted">Exact values only, newest first. eventId, aggregateId, correlationId, operationId and eventType search the events; destination lists that destination's deliveries in every state; errorCode lists the attempts that failed with that code (at = when the attempt finished); timeRange takes no value, only From and To.</p>
</form>
{{if .Error}}<p class="err" id="search-error" role="alert">{{.Error}}</p>{{end}}
{{if .Searched}}{{if .Hits}}<div class="table-wrap"><table id="search-results"><caption>{{len .Hits}} result(s) for {{.Kind}}{{if .Value}} = <code>{{.Value}}</code>{{end}}{{if .Before}} (continued){{end}}, newest first</caption>
<thead><tr><th scope="col">at</th><th scope="col">event</th><th scope="col">type</th><th scope="col">aggregate</th><th scope="col">correlation / operation</th>{{if .DeliveryKind}}<th scope="col">destination</th><th scope="col">state</th><th scope="col">error code</th>{{end}}</tr></thead>
<tbody>{{range .Hits}}<tr class="hit" data-event-id="{{.EventID}}"><td class="nowrap">{{t .At}}</td><td><a class="event-link" href="/console/event?id={{.EventID}}"><code>{{.EventID}}</code></a></td><td>{{.EventType}}</td><td>{{.AggregateID}}</td><td>{{s .CorrelationID}} / {{s .OperationID}}</td>
{{if $.DeliveryKind}}<td>{{s .Destination}}</td><td>{{with .Status}}<span class="state state-{{.}}">{{.}}</span>{{end}}</td><td>{{s .ErrorCode}}</td>{{end}}</tr>
{{end}}</tbody></table></div>
{{if .Next}}<p><a id="next-page" rel="next" href="{{.Next}}">next page</a></p>{{end}}
{{else}}<p class="warn" id="search-none" role="status">Nothing found for {{.Kind}}{{if .Value}} = <code>{{.Value}}</code>{{end}} in the hot tables{{if or .From .To}} within the range{{end}}. Archived events are not searched here (docs/retention.md).</p>{{end}}{{end}}
{{template "foot" .}}{{end}}

{{define "list"}}{{template "head" .}}
<h1>Deliveries</h1>
<form method="get" action="/console/deliveries" id="filter-form" class="panel formrow">
<div><label for="f-destination">Destination</label>
<select id="f-destination" name="destination"><option value="">choose…</option>{{$sel := .Destination}}{{range .Destinations}}<option value="{{.}}"{{if eq . $sel}} selected{{end}}>{{.}}</option>{{end}}</select></div>
<div><label for="f-state">State</label>
<select id="f-state" name="state">{{$st := .State}}{{range .States}}<option value="{{.}}"{{if eq . $st}} selected{{end}}>{{.}}</option>{{end}}</select></div>
<div><button type="submit">filter</button></div></form>
{{if .Destination}}{{$d := .Destination}}
<p id="state-counts">{{range $i, $c := .Counts}}{{if $i}} · {{end}}<a href="/console/deliveries?destination={{q $d}}&amp;state={{$c.Status}}"{{if eq $c.Status $st}} aria-current="page"{{end}}>{{$c.Status}}: {{count $c}}</a>{{end}}</p>
<h2 id="list-heading">{{.State}} deliveries of {{.Destination}}, oldest first{{if .After}} (continued){{end}}</h2>
{{if .Items}}<div class="table-wrap"><table id="deliveries" aria-labelledby="list-heading">
<thead><tr><th scope="col">event</th><th scope="col">type</th><th scope="col">state</th><th scope="col">created</th><th scope="col">available</th><th scope="col" class="n">attempts</th><th scope="col">last error</th><th scope="col">lease owner / expiry</th><th scope="col">delivered</th></tr></thead>
<tbody>{{range .Items}}<tr class="item"><td><a class="event-link" href="/console/event?id={{.EventID}}"><code>{{.EventID}}</code></a></td><td>{{.EventType}}</td>
<td><span class="state state-{{.Status}}">{{.Status}}</span></td><td>{{t .CreatedAt}}</td><td>{{t .AvailableAt}}</td><td class="n">{{.AttemptCount}}</td>
<td>{{s .LastErrorCode}}</td><td>{{s .LeaseOwner}} {{if .LeaseExpiresAt}}until {{t .LeaseExpiresAt}}{{end}}</td><td>{{t .DeliveredAt}}</td></tr>
{{end}}</tbody></table></div>{{else}}<p id="deliveries" class="muted">no {{.State}} deliveries{{if .After}} after this point{{end}}</p>{{end}}
<p>{{if .After}}<a href="/console/deliveries?destination={{q $d}}&amp;state={{.State}}" id="first-page">first page</a>{{end}}
{{if .Next}} <a href="/console/deliveries?destination={{q $d}}&amp;state={{.State}}&amp;after={{.Next}}{{if ne .Limit 50}}&amp;limit={{.Limit}}{{end}}" id="next-page" rel="next">next page</a>{{end}}</p>
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
<p><button type="submit" id="redeliver-{{.ID}}">re-deliver the original event</button></p></form>{{end}}

{{define "event"}}{{template "head" .}}
<h1>Event {{if .ID}}<code id="event-id">{{.ID}}</code>{{else}}lookup{{end}}</h1>
{{template "lookup" .ID}}
{{if .NotFound}}<p class="warn" id="not-found" role="status">No event with this id in the hot tables (it may never have existed, or it was archived: see docs/retention.md).</p>{{end}}
{{with .Event}}{{$op := $.Operator}}
<h2 id="envelope-heading">Envelope</h2>
<div class="table-wrap"><table id="envelope" class="kv" aria-labelledby="envelope-heading"><tr><th scope="row">type</th><td id="event-type">{{.EventType}} (schema {{.SchemaVersion}})</td></tr>
<tr><th scope="row">envelope digest</th><td><code id="envelope-digest">{{.EnvelopeDigestAlgorithm}}:{{.EnvelopeSHA256}}</code></td></tr>
<tr><th scope="row">delivery-set quartet</th><td id="event-quartet">version {{.DeliverySetVersion}}, definition schema {{.DefinitionSchemaVersion}}, {{.DigestAlgorithmVersion}}, <code>{{.DefinitionDigest}}</code></td></tr>
<tr><th scope="row">aggregate</th><td><a href="/console/search?kind=aggregateId&amp;q={{q .AggregateID}}">{{.AggregateID}}</a> revision {{.AggregateRevision}}</td></tr>
<tr><th scope="row">tenant</th><td>{{.TenantKind}} {{.TenantID}}, workspace {{.WorkspaceID}}{{if .ProjectID}}, project {{s .ProjectID}}{{end}}</td></tr>
<tr><th scope="row">operation / correlation / causation</th><td>{{with .OperationID}}<a href="/console/search?kind=operationId&amp;q={{q (s .)}}">{{.}}</a>{{else}}-{{end}} / {{with .CorrelationID}}<a href="/console/search?kind=correlationId&amp;q={{q (s .)}}">{{.}}</a>{{else}}-{{end}} / {{s .CausationID}}</td></tr>
<tr><th scope="row">occurred / appended</th><td>{{t .OccurredAt}} / {{t .CreatedAt}}</td></tr>
<tr><th scope="row">publication</th><td id="publication">{{if .PublishedAt}}published at {{t .PublishedAt}}{{else}}not published: a mandatory delivery is not acknowledged yet{{end}}</td></tr>
<tr><th scope="row">payload</th><td id="payload">{{if $.ShowPayload}}<pre id="payload-body">{{$.Payload}}</pre>{{else}}hidden ({{.PayloadBytes}} bytes){{if $.Payloads}} - <a href="/console/event?id={{.EventID}}&amp;payload=show" id="show-payload">show payload</a>{{else}}; this console was started without -show-payloads{{end}}{{end}}</td></tr>
</table></div>
<h2>Deliveries</h2>
{{range $i, $d := $.Deliveries}}
<section class="delivery panel" id="delivery-{{.Destination}}" aria-labelledby="dh-{{.Destination}}">
<h3 id="dh-{{.Destination}}">{{.Destination}}: <span class="state state-{{.Status}}" id="status-{{.Destination}}">{{.Status}}</span></h3>
<div class="table-wrap"><table class="kv"><caption>delivery to {{.Destination}}</caption><tr><th scope="row">frozen member</th><td id="member-{{.Destination}}">consumer {{.ConsumerName}}, receipt {{.ExpectedReceiptType}} v{{.ExpectedReceiptSchemaVersion}}, projection {{s .ProjectionState}}{{if .RequiredProjectionName}} ({{s .RequiredProjectionName}} v{{s .RequiredProjectionVersion}}){{end}}, {{if .Mandatory}}mandatory{{else}}optional{{end}}</td></tr>
<tr><th scope="row">timing</th><td>created {{t .CreatedAt}}, available {{t .AvailableAt}}, last attempt {{t .LastAttemptAt}}{{if .LeaseOwner}}, leased by {{s .LeaseOwner}} until {{t .LeaseExpiresAt}}{{end}}</td></tr>
<tr><th scope="row">attempts</th><td>{{.AttemptCount}}{{if .RecoveryAttemptBase}} ({{.RecoveryAttemptBase}} before the last recovery){{end}}; recoveries {{.Recoveries}}</td></tr>
<tr><th scope="row">last error</th><td>{{with .LastErrorCode}}<a href="/console/search?kind=errorCode&amp;q={{q (s .)}}">{{.}}</a>{{else}}-{{end}} {{if .LastErrorRef}}(ref <code>{{s .LastErrorRef}}</code>){{end}}</td></tr>
<tr><th scope="row">receipt</th><td id="receipt-{{.Destination}}">{{if .ReceiptDigest}}{{s .ReceiptKind}} / {{s .ReceiptType}}: ref <code>{{s .ReceiptRef}}</code>, schema {{s .ReceiptSchemaVersion}}, {{s .ReceiptDigestAlgorithm}}, digest <code>{{s .ReceiptDigest}}</code>; delivered {{t .DeliveredAt}}{{else}}none yet{{end}}</td></tr>
{{if .QuarantineReason}}<tr><th scope="row">quarantine</th><td id="quarantine-{{.Destination}}">{{s .QuarantineReason}} since {{t .QuarantinedAt}}{{if .CaseID}}, case {{s .CaseID}}{{end}}</td></tr>{{end}}
</table></div>
<div class="table-wrap"><table class="attempts" id="attempts-{{.Destination}}"><caption>attempt history of {{.Destination}}</caption>
<thead><tr><th scope="col" class="n">#</th><th scope="col">worker</th><th scope="col">started</th><th scope="col">finished</th><th scope="col">outcome</th><th scope="col">disposition</th><th scope="col">error code</th><th scope="col">sanitized ref</th></tr></thead>
<tbody>{{range .Attempts}}<tr class="attempt"><td class="n">{{.AttemptNumber}}</td><td>{{.Worker}}</td><td>{{t .StartedAt}}</td><td>{{if .FinishedAt}}{{t .FinishedAt}}{{else}}in flight{{end}}</td>
<td class="outcome">{{s .Outcome}}</td><td>{{s .RetryDisposition}}</td><td class="error-code">{{s .ErrorCode}}</td><td>{{if .ErrorRef}}<code>{{s .ErrorRef}}</code>{{else}}-{{end}}</td></tr>
{{else}}<tr><td colspan="8">no attempt yet</td></tr>{{end}}</tbody></table></div>
{{with .Preview}}<div class="preview"><h4>Re-delivery preview</h4><p id="preview-{{.Destination}}">{{.WouldChange}}</p></div>
{{if $op}}{{template "redeliver-form" (dict "ID" (printf "d%d" $i) "Destination" .Destination "EventID" .EventID "Key" $d.Key "CSRF" $.CSRF)}}{{end}}
<details><summary>command line</summary>{{template "cmd" (printf "outboxctl quarantine redeliver %s %s --case CASE-ID --reason 'REASON' --key %s" (sh .Destination) .EventID $d.Key)}}</details>{{end}}
</section>{{end}}
{{end}}
{{template "foot" .}}{{end}}

{{define "quarantine"}}{{template "head" .}}
<h1>Quarantine, grouped by reason</h1>
<form method="get" action="/console/quarantine" id="quarantine-filter" class="panel formrow">
<div><label for="qf-destination">Destination</label><select id="qf-destination" name="destination"><option value="">all</option>{{$sd := .Destination}}{{range .Destinations}}<option value="{{.}}"{{if eq . $sd}} selected{{end}}>{{.}}</option>{{end}}</select></div>
<div><label for="qf-reason">Reason</label><select id="qf-reason" name="reason"><option value="">all</option>{{$sr := .Reason}}{{range .Reasons}}<option value="{{.}}"{{if eq . $sr}} selected{{end}}>{{.}}</option>{{end}}</select></div>
<div><button type="submit">filter</button></div></form>
{{if not .Groups}}<p id="no-quarantine" class="okbox">nothing is quarantined{{if or .Destination .Reason}} for this filter{{end}}</p>{{end}}
{{range $g, $grp := .Groups}}
<section class="qgroup" aria-labelledby="qg-{{$g}}"><h2 id="qg-{{$g}}">{{.Destination}} - <span class="reason">{{.Reason}}</span>: <span class="qcount">{{.Count}}</span></h2>
{{if gt .Count (len .Items | int64)}}<p class="muted">showing the newest {{len .Items}}; <a href="/console/deliveries?destination={{q .Destination}}&amp;state=quarantined">all quarantined deliveries of {{.Destination}}</a>, oldest first</p>{{end}}
{{range $i, $it := .Items}}<article class="qitem panel" aria-labelledby="qi-{{$g}}-{{$i}}">
<h3 id="qi-{{$g}}-{{$i}}"><span class="state state-quarantined">quarantined</span> <a class="event-link" href="/console/event?id={{.EventID}}"><code>{{.EventID}}</code></a> {{.EventType}}</h3>
<p>last error {{s .LastErrorCode}}, {{.AttemptCount}} attempts, quarantined {{t .QuarantinedAt}}{{if .CaseID}}, case {{s .CaseID}}{{end}}, re-delivered {{.Recoveries}} time(s) before</p>
<p class="preview"><strong>Preview:</strong> <span class="would-change">{{.Preview.WouldChange}}</span></p>
{{if $.Operator}}<details{{if and (eq $g 0) (eq $i 0)}} open{{end}}><summary>re-deliver {{.EventID}} to {{.Destination}}</summary>{{template "redeliver-form" (dict "ID" (printf "q%d-%d" $g $i) "Destination" .Destination "EventID" .EventID "Key" $it.Key "CSRF" $.CSRF)}}</details>{{end}}
<details><summary>command line</summary>{{template "cmd" (printf "outboxctl quarantine redeliver %s %s --case CASE-ID --reason 'REASON' --key %s" (sh .Destination) .EventID $it.Key)}}</details>
</article>{{end}}</section>{{end}}
{{template "foot" .}}{{end}}

{{define "redelivered"}}{{template "head" .}}
<h1>Re-delivered</h1>
<p class="okbox" id="redelivered" role="status">The original event <a href="/console/event?id={{.EventID}}"><code>{{.EventID}}</code></a> is due again at {{.Destination}}: status <strong id="new-status">{{.Status}}</strong>, audit row <code id="recovery-id">{{.RecoveryID}}</code> (case {{.CaseID}}, key {{.IdempotencyKey}}). Sending the same key again returns this same audit row.</p>
<p><a href="/console/quarantine">back to the quarantine</a></p>
{{template "foot" .}}{{end}}

{{define "claims"}}{{template "head" .}}
<h1>Claims {{.Action}}d</h1>
<p class="okbox" id="claims-result" role="status">Claims of <strong id="claims-destination">{{.Destination}}</strong> are <strong id="claims-state">{{if eq .Action "pause"}}paused{{else}}running{{end}}</strong>{{if .Reason}} (reason: {{.Reason}}){{end}}. The change is in the audit log outbox.destination_claim_pause_log under your login (nothing is written when the destination was already {{if eq .Action "pause"}}paused{{else}}running{{end}}).{{if eq .Action "pause"}} Pending deliveries stay pending; leases already handed out run to their end.{{end}}</p>
<p><a href="/console" id="back-overview">back to the overview</a></p>
{{template "foot" .}}{{end}}
`
