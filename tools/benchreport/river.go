package main

// The "Side by side with River (same run)" section (SPEC §12a P-1, P-2): the RESULT lines that
// scripts/bench-river.sh collects from bench/river/cmd/riverbench and bench/outboxbench.

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// sideBySideHeading starts the section; benchreport -in "" replaces just this section.
const sideBySideHeading = "## Side by side with River (same run)"

type sbsResult struct {
	system, mode string
	round        int
	kv           map[string]string
}

func (r sbsResult) num(key string) (float64, bool) {
	v, err := strconv.ParseFloat(r.kv[key], 64)
	return v, err == nil
}

type sideBySide struct {
	header, machine, machineEnd string
	results                     []sbsResult
	// the scale curve's RESULT lines (label=curve, SPEC R-DP-9), kept out of results so they
	// never enter the P-1 figures
	curve []sbsResult
	// the per-statement budget of outboxbench (HP-6): BUDGET, STMT and FUNC lines; CSTMT: the
	// consumer database's statements of p3/p3c
	budget, stmts, funcs, cstmts []sbsResult
}

// parseKV reads `<kind> <system> <mode> key=value …`; a STMT line's query= is the rest of the
// line (query text with spaces).
func parseKV(line string) (sbsResult, bool) {
	query := ""
	if i := strings.Index(line, " query="); i >= 0 {
		line, query = line[:i], line[i+len(" query="):]
	}
	f := strings.Fields(line)
	if len(f) < 3 {
		return sbsResult{}, false
	}
	res := sbsResult{system: f[1], mode: f[2], kv: map[string]string{}}
	for _, p := range f[3:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			res.kv[k] = v
		}
	}
	if query != "" {
		res.kv["query"] = query
	}
	res.round, _ = strconv.Atoi(res.kv["round"])
	return res, true
}

// parseSideBySide reads `# …` (run header), `MACHINE …`, `MACHINE_END …` and
// `RESULT <system> <mode> key=value …` lines; anything else is ignored.
func parseSideBySide(r io.Reader) (sideBySide, error) {
	var s sideBySide
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "# ") && s.header == "":
			s.header = strings.TrimPrefix(line, "# ")
		case strings.HasPrefix(line, "MACHINE_END "):
			s.machineEnd = strings.TrimPrefix(line, "MACHINE_END ")
		case strings.HasPrefix(line, "MACHINE "):
			s.machine = strings.TrimPrefix(line, "MACHINE ")
		case strings.HasPrefix(line, "RESULT "):
			if res, ok := parseKV(line); ok {
				if res.kv["label"] == curveLabel {
					s.curve = append(s.curve, res)
				} else {
					s.results = append(s.results, res)
				}
			}
		case strings.HasPrefix(line, "BUDGET "):
			if res, ok := parseKV(line); ok {
				s.budget = append(s.budget, res)
			}
		case strings.HasPrefix(line, "STMT "):
			if res, ok := parseKV(line); ok {
				s.stmts = append(s.stmts, res)
			}
		case strings.HasPrefix(line, "CSTMT "):
			if res, ok := parseKV(line); ok {
				s.cstmts = append(s.cstmts, res)
			}
		case strings.HasPrefix(line, "FUNC "):
			if res, ok := parseKV(line); ok {
				s.funcs = append(s.funcs, res)
			}
		}
	}
	return s, sc.Err()
}

// comparison is one obligation: River's mode against pgoutbox's mode; the ratio is
// outboxKey / River's jobs_per_sec of the same round (one alternating pair).
type comparison struct {
	id, what              string
	riverMode, outboxMode string
	riverUnit, outboxKey  string
	required, aim         float64
	optional              bool // only reported when the run has it (P-6 lands from another branch)
}

var comparisons = []comparison{
	{"P-1", "dispatch of a pre-appended backlog", "backlog", "p1", "worked jobs/s", "deliveries_per_sec", 0.5, 1.0, false},
	{"P-2", "the same with producers appending in transactions of 100", "concurrent", "p2", "insert-and-work jobs/s", "deliveries_per_sec", 0.5, 1.0, false},
	{"P-6", "appends in transactions of 100 (append_events vs InsertMany)", "insertmany", "p6", "inserted jobs/s", "appended_per_sec", 0.25, 0.5, true},
	// P-3 (issue 21 item 3): end to end over HTTP to a consumer writing in its own database.
	{"P-3", "end to end over HTTP from a backlog (pgoutbox: dispatcher + consumer kit writing its receipt; River: HTTP worker, consumer writes one row)", "p3", "p3", "worked jobs/s", "deliveries_per_sec", 0.5, 1.0, true},
	{"P-3c", "the same with producers appending in transactions of 100", "p3c", "p3c", "insert-and-work jobs/s", "deliveries_per_sec", 0.5, 1.0, true},
}

// bimodalSpread is P-7's limit: pairs (or one side's runs) more than 1.5x apart are a defect
// to explain, not an average to quote.
const bimodalSpread = 1.5

// spread is one side's values over the rounds: median, min, max.
type spread struct {
	n                int
	median, min, max float64
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{len(s), m, s[0], s[len(s)-1]}
}

// factor is max/min (1 for fewer than two values or a zero minimum).
func (s spread) factor() float64 {
	if s.n < 2 || s.min <= 0 {
		return 1
	}
	return s.max / s.min
}

func (s spread) text() string {
	if s.n == 0 {
		return "—"
	}
	if s.n == 1 {
		return num(s.median)
	}
	return num(s.median) + " (" + num(s.min) + "–" + num(s.max) + ")"
}

// pairStats is one obligation over the rounds: each side's spread, the per-pair ratios and why
// the set is bimodal (empty when it is not).
type pairStats struct {
	c              comparison
	river, outbox  spread
	ratios         []float64
	ratio          spread
	bimodal        string
	measured, seen bool
}

func (s sideBySide) stats(c comparison) pairStats {
	st := pairStats{c: c}
	var rs, os []float64
	for _, round := range s.rounds() {
		rr, okR := s.find("river", c.riverMode, round)
		or, okO := s.find("pgoutbox", c.outboxMode, round)
		rj, okRJ := rr.num("jobs_per_sec")
		ov, okOV := or.num(c.outboxKey)
		okR, okO = okR && okRJ, okO && okOV
		st.seen = st.seen || okR || okO
		if okR {
			rs = append(rs, rj)
		}
		if okO {
			os = append(os, ov)
		}
		if okR && okO && rj > 0 {
			st.ratios = append(st.ratios, ov/rj)
		}
	}
	st.river, st.outbox, st.ratio = spreadOf(rs), spreadOf(os), spreadOf(st.ratios)
	st.measured = len(st.ratios) > 0
	var why []string
	if f := st.ratio.factor(); f > bimodalSpread {
		why = append(why, "pairs "+ratioText(f)+"× apart")
	}
	if f := st.outbox.factor(); f > bimodalSpread {
		why = append(why, "pgoutbox runs "+ratioText(f)+"× apart")
	}
	if f := st.river.factor(); f > bimodalSpread {
		why = append(why, "River runs "+ratioText(f)+"× apart")
	}
	st.bimodal = strings.Join(why, ", ")
	return st
}

func (s sideBySide) find(system, mode string, round int) (sbsResult, bool) {
	for _, r := range s.results {
		if r.system == system && r.mode == mode && r.round == round {
			return r, true
		}
	}
	return sbsResult{}, false
}

func (s sideBySide) rounds() []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range s.results {
		if !seen[r.round] {
			seen[r.round] = true
			out = append(out, r.round)
		}
	}
	sort.Ints(out)
	return out
}

// first returns the value of key in the first result of system that has it.
func (s sideBySide) first(system, key string) string {
	for _, r := range s.results {
		if v, ok := r.kv[key]; ok && r.system == system {
			return v
		}
	}
	return ""
}

func renderSideBySide(b *strings.Builder, s sideBySide, settings [][2]string) {
	fmt.Fprintf(b, "%s\n\n", sideBySideHeading)
	if len(s.results) == 0 {
		fmt.Fprintf(b, "Not measured in this run (`make bench-river`).\n\n")
		return
	}
	rv := s.first("river", "river_version")
	if rv == "" {
		rv = "?"
	}
	fmt.Fprintf(b, "River %s (riverpgxv5 driver, schema by rivermigrate in a database of its own; module `bench/river`) and pgoutbox, alternating on the same cluster in one run (`scripts/bench-river.sh`: per round River backlog, pgoutbox P-1, River concurrent, pgoutbox P-2, and River InsertMany, pgoutbox P-6 when both sides have that mode; every run in a freshly created database).", rv)
	if s.header != "" {
		fmt.Fprintf(b, " Run: %s.", s.header)
	}
	fmt.Fprintf(b, " N = %s jobs / events per run, payload %s bytes.", orQ(s.first("river", "jobs")), orQ(s.first("river", "payload_bytes")))
	if s.machine != "" {
		fmt.Fprintf(b, " Machine: %s", s.machine)
		if s.machineEnd != "" {
			fmt.Fprintf(b, ", %s", s.machineEnd)
		}
		fmt.Fprintf(b, ".")
	}
	var pg []string
	for _, kv := range settings {
		switch kv[0] {
		case "server_version", "fsync", "synchronous_commit", "shared_buffers":
			pg = append(pg, kv[0]+" "+kv[1])
		}
	}
	if len(pg) > 0 {
		fmt.Fprintf(b, " PostgreSQL: %s.", strings.Join(pg, ", "))
	}
	fmt.Fprintf(b, "\n\n| obligation | round | River | pgoutbox | pgoutbox events published/s | pgoutbox / River |\n|---|---|---|---|---|---|\n")
	var sums []pairStats
	for _, c := range comparisons {
		st := s.stats(c)
		if !st.seen {
			if !c.optional {
				sums = append(sums, st)
			}
			continue
		}
		outboxUnit := "deliveries/s"
		if c.outboxKey == "appended_per_sec" {
			outboxUnit = "appended/s"
		}
		for _, round := range s.rounds() {
			rr, okR := s.find("river", c.riverMode, round)
			or, okO := s.find("pgoutbox", c.outboxMode, round)
			rj, _ := rr.num("jobs_per_sec")
			ov, _ := or.num(c.outboxKey)
			op, okP := or.num("events_published_per_sec")
			cell := func(ok bool, v float64) string {
				if !ok {
					return "—"
				}
				return num(v)
			}
			ratio := "—"
			if okR && okO && rj > 0 {
				ratio = ratioText(ov / rj)
			}
			fmt.Fprintf(b, "| %s %s | %d | %s %s | %s %s | %s | %s |\n", c.id, c.what, round, cell(okR, rj), c.riverUnit,
				cell(okO, ov), outboxUnit, cell(okO && okP, op), ratio)
		}
		sums = append(sums, st)
	}
	fmt.Fprintf(b, "\nP-7: every figure over its alternating pairs (one pair = River and pgoutbox in the same round): median (min–max) of each side, the per-pair ratios and their median; a set whose pairs or runs are more than %s× apart is **BIMODAL**, a defect to explain rather than an average to quote.\n\n", ratioText(bimodalSpread))
	fmt.Fprintf(b, "| obligation | pairs | River median (min–max) | pgoutbox median (min–max) | per-pair ratios | median ratio | required | aim | |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range comparisons {
		var st pairStats
		found := false
		for _, x := range sums {
			if x.c.id == c.id {
				st, found = x, true
			}
		}
		if !found {
			if c.optional {
				fmt.Fprintf(b, "| %s | 0 | — | — | — | not measured in this run (modes `%s` / `%s` not available) | ≥ %s | %s | — |\n", c.id, c.riverMode, c.outboxMode, ratioText(c.required), ratioText(c.aim))
			}
			continue
		}
		if !st.measured {
			fmt.Fprintf(b, "| %s | 0 | %s | %s | — | not measured | ≥ %s | %s | — |\n", c.id, st.river.text(), st.outbox.text(), ratioText(c.required), ratioText(c.aim))
			continue
		}
		rs := make([]string, len(st.ratios))
		for i, r := range st.ratios {
			rs[i] = ratioText(r)
		}
		mark := "met"
		switch {
		case st.ratio.median < c.required:
			mark = "**missed**"
		case st.ratio.median >= c.aim:
			mark = "met, aim reached"
		}
		if len(st.ratios) < 3 {
			mark += "; fewer than 3 pairs (P-7)"
		}
		if st.bimodal != "" {
			mark += "; **BIMODAL** (" + st.bimodal + ")"
		}
		fmt.Fprintf(b, "| %s | %d | %s %s | %s | %s | **%s** | ≥ %s | %s | %s |\n", c.id, len(st.ratios), st.river.text(), c.riverUnit,
			st.outbox.text(), strings.Join(rs, ", "), ratioText(st.ratio.median), ratioText(c.required), ratioText(c.aim), mark)
	}
	fmt.Fprintf(b, "\n")
	renderCeiling(b, s)
	fmt.Fprintf(b, "How each side was driven: River as in its own benchmark (cmd/river/riverbench): no-op worker, MaxWorkers %s, FetchCooldown %s, FetchPollInterval %s, pgxpool of %s connections, completions counted on the subscribe channel from client.Start to the last job; backlog inserted with InsertMany in batches of 5,000, concurrent producers with InsertManyTx in transactions of %s. pgoutbox through the public SQL API: %s worker connections as outbox_dispatcher, each looping claim_deliveries(batch %s) → receipt and ActiveConsumerAck@1 built in Go by the receipt package → ack (`%s`), one destination; events appended by the producer library (D-2 hot path) as outbox_producer in transactions of %s by %s producer connections.\n\n",
		orQ(s.first("river", "max_workers")), orQ(s.first("river", "fetch_cooldown")), orQ(s.first("river", "fetch_poll")),
		orQ(s.first("river", "pool_conns")), orQ(s.first("river", "tx_size")), orQ(s.first("pgoutbox", "workers")),
		orQ(s.first("pgoutbox", "batch")), orQ(s.first("pgoutbox", "ack")), orQ(s.first("pgoutbox", "tx_size")),
		orQ(s.first("pgoutbox", "producers")))
	renderLatencyWAL(b, s)
	renderP3CPU(b, s)
	renderBudget(b, s)
	renderCurve(b, s)
}

// renderP3CPU is P-5 for the end-to-end runs (issue 36 item 5): the Go CPU per delivery of each
// process - the dispatcher binary and the consumer kit's process - and how the outcomes came
// back, per round, with the median.
func renderP3CPU(b *strings.Builder, s sideBySide) {
	type col struct{ key, title string }
	cols := []col{{"dispatcher_cpu_us_per_delivery", "dispatcher CPU µs / delivery"}, {"consumer_cpu_us_per_delivery", "consumer kit process CPU µs / delivery"},
		{"acks_per_call", "outcomes per ack call"}, {"claim_calls", "claim calls"}}
	var rows []sbsResult
	for _, r := range s.results {
		if r.system == "pgoutbox" && (r.mode == "p3" || r.mode == "p3c") {
			if _, ok := r.kv["dispatcher_cpu_us_per_delivery"]; ok {
				rows = append(rows, r)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "### P-3 / P-3c: Go CPU per delivery of each side (P-5)\n\n")
	fmt.Fprintf(b, "The dispatcher binary's CPU (its `process_cpu_seconds_total`) and the consumer process's (outboxbench serving the consumer kit over HTTP: `getrusage`, p3c includes its producers' client work) over the measured phase, divided by the deliveries; consumer path `%s`. A shared machine inflates both.\n\n", orQ(s.first("pgoutbox", "consumer_path")))
	fmt.Fprintf(b, "| run | round |")
	for _, c := range cols {
		fmt.Fprintf(b, " %s |", c.title)
	}
	fmt.Fprintf(b, "\n|---|---|%s\n", strings.Repeat("---|", len(cols)))
	for _, mode := range []string{"p3", "p3c"} {
		xs := make([][]float64, len(cols))
		seen := false
		for _, r := range rows {
			if r.mode != mode {
				continue
			}
			seen = true
			fmt.Fprintf(b, "| %s | %d |", mode, r.round)
			for i, c := range cols {
				v, ok := r.num(c.key)
				if !ok {
					fmt.Fprintf(b, " — |")
					continue
				}
				xs[i] = append(xs[i], v)
				fmt.Fprintf(b, " %s |", r.kv[c.key])
			}
			fmt.Fprintf(b, "\n")
		}
		if seen {
			fmt.Fprintf(b, "| %s | median (min–max) |", mode)
			for i := range cols {
				fmt.Fprintf(b, " %s |", spreadOf(xs[i]).text())
			}
			fmt.Fprintf(b, "\n")
		}
	}
	fmt.Fprintf(b, "\n")
}

// ratioText renders a ratio with two decimals.
func ratioText(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// replaceSection returns doc with the side-by-side section replaced by section (inserted before
// "## Targets", or appended, when doc has none).
func replaceSection(doc, section string) string {
	return replaceHeading(doc, sideBySideHeading, section, "## Targets")
}

// replaceHeading returns doc with the section that starts with heading (up to the next "## ")
// replaced by section; a doc without it gets section before the heading before, or at the end.
func replaceHeading(doc, heading, section, before string) string {
	if i := strings.Index(doc, heading); i >= 0 {
		rest := doc[i+len(heading):]
		if j := strings.Index(rest, "\n## "); j >= 0 {
			return doc[:i] + section + rest[j+1:]
		}
		return doc[:i] + section
	}
	if before != "" {
		if i := strings.Index(doc, before); i >= 0 {
			return doc[:i] + section + doc[i:]
		}
	}
	if doc != "" && !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + section
}
